// The vector ALU: one accumulator row per cycle.  An op that starts in cycle
// s processes rows in cycles s + 1 .. s + rows and occupies the unit for
// rows + alu.latency_cycles cycles (not pipelined across instructions); its
// completion pulse is in cycle s + rows + latency - 1.  vrequant reads its
// shift row through the source port in cycle s (the unit is otherwise idle
// then) and its multiplier row in every row cycle.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_alu_unit #(
  parameter int IDX_W = 16,
  parameter int ACC_ROW_BITS = 10,
  parameter int ROW_W = 512
) (
  input  wire logic                    clk_i,
  input  wire logic                    rst_ni,
  input  wire logic                    q_valid_i,
  input  wire logic [IDX_W+127:0]      q_data_i,
  output logic                         q_pop_o,
  input  wire logic [3:0]              tok_avail_i,
  output logic      [3:0]              consume_o,
  output logic      [ACC_ROW_BITS-1:0] raddr_dst_o,
  input  wire logic [ROW_W-1:0]        rdata_dst_i,
  output logic      [ACC_ROW_BITS-1:0] raddr_src_o,
  input  wire logic [ROW_W-1:0]        rdata_src_i,
  output logic                         we_o,
  output logic      [ACC_ROW_BITS-1:0] waddr_o,
  output logic      [ROW_W-1:0]        wdata_o,
  output logic                         comp_o,
  output logic      [3:0]              comp_signal_o,
  output logic      [IDX_W-1:0]        comp_idx_o,
  output logic                         start_o,
  output logic      [IDX_W-1:0]        start_idx_o
);
  `include "tinynpu_isa.vh"

  localparam int WideW = 2 * TNPU_ACC_BITS;  // vrequant's exact product

  // The queue entry is the whole word; opcode and reserved bits were checked at dispatch.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [127:0]     word;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [IDX_W-1:0] idx;
  logic [3:0]       wait_m;
  logic [TNPU_VADD_ROWS_W-1:0] rows;
  assign word   = q_data_i[127:0];
  assign idx    = q_data_i[IDX_W+127:128];
  assign wait_m = word[TNPU_VADD_WAIT_LSB +: TNPU_VADD_WAIT_W];
  assign rows   = word[TNPU_VADD_ROWS_LSB +: TNPU_VADD_ROWS_W];

  logic [15:0]      rem_q;
  logic [TNPU_VADD_ROWS_W-1:0] left_q;
  logic [3:0]       funct_q, signal_q;
  logic [TNPU_VADD_DST_W-1:0] dst_q, src_q;
  logic [TNPU_VMAX_IMM_W-1:0] imm_q;
  logic [4:0]       shift_q;
  logic [IDX_W-1:0] idx_q;
  logic [TNPU_TILE*5-1:0] rq_shift_q;  // vrequant: each lane's shift S (low 5 bits of row src+1)
  logic             rq_start;
  assign rq_start = start_o && (word[7:4] == 4'(TNPU_VREQUANT_FUNCT));

  assign start_o     = q_valid_i && ((wait_m & ~tok_avail_i) == 4'b0) && (rem_q == '0);
  assign start_idx_o = idx;
  assign q_pop_o     = start_o;
  assign consume_o   = start_o ? wait_m : 4'b0;

  assign raddr_dst_o = ACC_ROW_BITS'(dst_q);
  assign raddr_src_o = rq_start ? ACC_ROW_BITS'(word[TNPU_VADD_SRC_LSB +: TNPU_VADD_SRC_W] + 1'b1)
                     : ACC_ROW_BITS'(src_q);
  assign waddr_o     = ACC_ROW_BITS'(dst_q);
  assign we_o        = (left_q != '0);

  for (genvar l = 0; l < TNPU_TILE; l++) begin : g_lane
    logic signed [TNPU_ACC_BITS-1:0] x, y, imm, res;
    logic signed [TNPU_ACC_BITS:0]   sx, half;
    assign x    = $signed(rdata_dst_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS]);
    assign y    = $signed(rdata_src_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS]);
    assign imm  = $signed(imm_q);
    assign sx   = {x[TNPU_ACC_BITS-1], x};
    assign half = $signed(((TNPU_ACC_BITS + 1)'(1) << shift_q) >> 1);
    // vrequant: (x * M + 2^(30+S)) >>> (31+S), exact in WideW bits, saturated to the acc width
    logic signed [WideW-1:0] rq;
    logic [4:0] rq_s;
    logic rq_fits;
    logic signed [TNPU_ACC_BITS-1:0] rq_sat;
    assign rq_s    = rq_shift_q[l*5 +: 5];
    assign rq      = (WideW'(x) * WideW'(y) + (WideW'(1) <<< (6'd30 + 6'(rq_s)))) >>> (6'd31 + 6'(rq_s));
    assign rq_fits = (rq[WideW-1:TNPU_ACC_BITS-1] == '0) || (rq[WideW-1:TNPU_ACC_BITS-1] == '1);
    assign rq_sat  = rq_fits ? rq[TNPU_ACC_BITS-1:0] : {rq[WideW-1], {(TNPU_ACC_BITS-1){~rq[WideW-1]}}};
    always @* begin
      case (funct_q)
        4'(TNPU_VADD_FUNCT), 4'(TNPU_VADDROW_FUNCT): res = x + y;
        4'(TNPU_VMAX_FUNCT): res = (x > imm) ? x : imm;
        4'(TNPU_VMIN_FUNCT): res = (x < imm) ? x : imm;
        4'(TNPU_VMUL_FUNCT): res = x * imm;
        4'(TNPU_VSHR_FUNCT): res = TNPU_ACC_BITS'((sx + half) >>> shift_q);
        4'(TNPU_VREQUANT_FUNCT): res = rq_sat;
        default: res = x;
      endcase
    end
    assign wdata_o[l*TNPU_ACC_BITS +: TNPU_ACC_BITS] = res;
  end

  assign comp_o        = (rem_q == 16'd1);
  assign comp_signal_o = signal_q;
  assign comp_idx_o    = idx_q;

  always @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rem_q    <= '0;
      left_q   <= '0;
      funct_q  <= '0;
      signal_q <= '0;
      dst_q    <= '0;
      src_q    <= '0;
      imm_q    <= '0;
      shift_q  <= '0;
      idx_q    <= '0;
      rq_shift_q <= '0;
    end else begin
      if (rem_q != '0) rem_q <= rem_q - 1'b1;
      if (left_q != '0) begin
        left_q <= left_q - 1'b1;
        dst_q  <= dst_q + 1'b1;
        // vaddrow and vrequant broadcast one source row; vadd walks the source range.
        if (funct_q != 4'(TNPU_VADDROW_FUNCT) && funct_q != 4'(TNPU_VREQUANT_FUNCT)) src_q <= src_q + 1'b1;
      end
      if (start_o) begin
        // rows_per_cycle is 1 in the RTL (the cosim driver refuses other configs).
        rem_q    <= 16'(rows) + 16'(TNPU_ALU_LATENCY) - 1'b1;
        left_q   <= rows;
        funct_q  <= word[7:4];
        signal_q <= word[TNPU_VADD_SIGNAL_LSB +: TNPU_VADD_SIGNAL_W];
        dst_q    <= word[TNPU_VADD_DST_LSB +: TNPU_VADD_DST_W];
        src_q    <= word[TNPU_VADD_SRC_LSB +: TNPU_VADD_SRC_W];
        imm_q    <= word[TNPU_VMAX_IMM_LSB +: TNPU_VMAX_IMM_W];
        shift_q  <= word[TNPU_VSHR_SHIFT_LSB +: TNPU_VSHR_SHIFT_W];
        idx_q    <= idx;
        if (rq_start)
          for (int l = 0; l < TNPU_TILE; l++) rq_shift_q[l*5 +: 5] <= rdata_src_i[l*TNPU_ACC_BITS +: 5];
      end
    end
  end
endmodule

`default_nettype wire
