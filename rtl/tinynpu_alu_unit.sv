// The vector ALU: one accumulator row per cycle.  An op that starts in cycle
// s processes rows in cycles s + 1 .. s + rows and occupies the unit for
// rows + alu.latency_cycles cycles (not pipelined across instructions); its
// completion pulse is in the last of them, cycle s + rows + latency - 1.
// vrequant reads its shift row through the source port in cycle s (the unit
// is otherwise idle then) and its multiplier row in every row cycle; vrequantf
// reads its scale row in every row cycle.  Each lane has one signed 32 x 32
// multiplier, shared by vmul (x * imm), vrequant (x * M) and vrequantf (the
// 24 x 24 significand product of tinynpu_requantf).
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_alu_unit import tinynpu_isa_pkg::*; #(
  parameter int IdxW = 16
) (
  input  wire logic                           clk_i,
  input  wire logic                           rst_ni,
  // The queue head {instruction index, word}: fields sit at their ISA positions; opcode,
  // funct and reserved bits were checked at dispatch.
  /* verilator lint_off UNUSEDSIGNAL */
  input  wire logic [IdxW+TNPU_WORD_BITS-1:0] head_i,
  /* verilator lint_on UNUSEDSIGNAL */
  input  wire logic                           start_i,
  output logic      [TNPU_OCC_BITS-1:0]       head_occ_o,
  input  wire logic                           occ_last_i,  // the last cycle of the running op
  // accumulator ports: the destination row (read, then written back) and a source row
  output logic      [TNPU_ACC_ADDR_BITS-1:0]  dst_addr_o,
  input  wire logic [TNPU_ACC_ROW_WIDTH-1:0]  dst_rdata_i,
  output logic                                dst_we_o,
  output logic      [TNPU_ACC_ROW_WIDTH-1:0]  dst_wdata_o,
  output logic      [TNPU_ACC_ADDR_BITS-1:0]  src_addr_o,
  input  wire logic [TNPU_ACC_ROW_WIDTH-1:0]  src_rdata_i,
  output logic                                comp_o,
  output logic      [TNPU_SIGNAL_W-1:0]       comp_signal_o,
  output logic      [IdxW-1:0]                comp_idx_o
);
  logic [IdxW-1:0]              head_idx;
  logic [TNPU_VADD_ROWS_W-1:0]  rows;
  logic [TNPU_FUNCT_W-1:0]      head_funct;
  logic [TNPU_SIGNAL_W-1:0]     head_signal;
  logic [TNPU_VADD_DST_W-1:0]   head_dst, head_src;
  logic [TNPU_VMAX_IMM_W-1:0]   head_imm;
  logic [TNPU_VSHR_SHIFT_W-1:0] head_shift;
  assign head_idx     = head_i[TNPU_WORD_BITS +: IdxW];
  assign rows         = head_i[TNPU_VADD_ROWS_LSB +: TNPU_VADD_ROWS_W];
  assign head_funct   = head_i[TNPU_FUNCT_LSB +: TNPU_FUNCT_W];
  assign head_signal  = head_i[TNPU_SIGNAL_LSB +: TNPU_SIGNAL_W];
  assign head_dst     = head_i[TNPU_VADD_DST_LSB +: TNPU_VADD_DST_W];
  assign head_src     = head_i[TNPU_VADD_SRC_LSB +: TNPU_VADD_SRC_W];
  assign head_imm     = head_i[TNPU_VMAX_IMM_LSB +: TNPU_VMAX_IMM_W];
  assign head_shift   = head_i[TNPU_VSHR_SHIFT_LSB +: TNPU_VSHR_SHIFT_W];
  localparam int WideW  = 2 * TNPU_ACC_BITS;  // vrequant's exact product
  localparam int ShiftW = TNPU_VSHR_SHIFT_W;  // vrequant's S: the low bits of row src + 1, as vshr's shift
  logic rq_start;
  assign rq_start = start_i && (head_funct == TNPU_FUNCT_W'(TNPU_VREQUANT_FUNCT));
  // rows_per_cycle is 1 in the RTL (the co-simulation refuses other configs).
  assign head_occ_o  = TNPU_OCC_BITS'(rows) + TNPU_OCC_BITS'(TNPU_ALU_LATENCY);

  logic [TNPU_VADD_ROWS_W-1:0] left_d, left_q;  // rows still to process
  logic [TNPU_FUNCT_W-1:0]     funct_d, funct_q;
  logic [TNPU_SIGNAL_W-1:0]    signal_d, signal_q;
  logic [TNPU_VADD_DST_W-1:0]  dst_d, dst_q, src_d, src_q;
  logic [TNPU_VMAX_IMM_W-1:0]  imm_d, imm_q;
  logic [TNPU_VSHR_SHIFT_W-1:0] shift_d, shift_q;
  logic [IdxW-1:0]             idx_d, idx_q;
  logic [TNPU_TILE*ShiftW-1:0] rq_shift_d, rq_shift_q;  // vrequant: each lane's shift S

  assign dst_addr_o = TNPU_ACC_ADDR_BITS'(dst_q);
  assign src_addr_o = rq_start ? TNPU_ACC_ADDR_BITS'(head_src + 1'b1) : TNPU_ACC_ADDR_BITS'(src_q);
  assign dst_we_o   = (left_q != '0);

  logic [TNPU_TILE*ShiftW-1:0] src_shifts;  // the low bits of each lane of the source row
  for (genvar l = 0; l < TNPU_TILE; l++) begin : g_lane
    logic signed [TNPU_ACC_BITS-1:0] x, y, imm, res;
    logic signed [TNPU_ACC_BITS:0]   sx, half;
    assign x    = $signed(dst_rdata_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS]);
    assign y    = $signed(src_rdata_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS]);
    assign imm  = $signed(imm_q);
    assign sx   = {x[TNPU_ACC_BITS-1], x};
    assign src_shifts[l*ShiftW +: ShiftW] = src_rdata_i[l*TNPU_ACC_BITS +: ShiftW];
    assign half = $signed(((TNPU_ACC_BITS + 1)'(1) << shift_q) >> 1);
    // The lane's multiplier: x * imm (vmul), x * M (vrequant), the significands (vrequantf).
    logic signed [TNPU_ACC_BITS-1:0] mul_a, mul_b;
    logic signed [WideW-1:0]         prod;
    logic [23:0]                     rqf_mant_a, rqf_mant_b;
    logic [TNPU_ACC_BITS-1:0]        rqf;
    assign mul_a = (funct_q == TNPU_FUNCT_W'(TNPU_VREQUANTF_FUNCT)) ? TNPU_ACC_BITS'(rqf_mant_a) : x;
    assign mul_b = (funct_q == TNPU_FUNCT_W'(TNPU_VREQUANTF_FUNCT)) ? TNPU_ACC_BITS'(rqf_mant_b)
                 : (funct_q == TNPU_FUNCT_W'(TNPU_VMUL_FUNCT)) ? imm : y;
    assign prod  = mul_a * mul_b;
    tinynpu_requantf u_requantf (
      .x_i     (x),
      .scale_i (y),
      .mant_a_o(rqf_mant_a),
      .mant_b_o(rqf_mant_b),
      .prod_i  (prod[47:0]),
      .y_o     (rqf)
    );
    // vrequant: (x * M + 2^(30+S)) >>> (31+S), exact in WideW bits, saturated to the acc width.
    logic signed [WideW-1:0]         rq;
    logic [ShiftW-1:0]               rq_s;
    logic                            rq_fits;
    logic signed [TNPU_ACC_BITS-1:0] rq_sat;
    assign rq_s    = rq_shift_q[l*ShiftW +: ShiftW];
    assign rq      = (prod + (WideW'(1) <<< (30 + int'(rq_s)))) >>> (31 + int'(rq_s));
    assign rq_fits = (rq[WideW-1:TNPU_ACC_BITS-1] == '0) || (rq[WideW-1:TNPU_ACC_BITS-1] == '1);
    assign rq_sat  = rq_fits ? rq[TNPU_ACC_BITS-1:0] : {rq[WideW-1], {(TNPU_ACC_BITS-1){~rq[WideW-1]}}};
    // A continuous assign: Icarus evaluates it faster than an always_comb per lane.
    assign res = (funct_q == TNPU_FUNCT_W'(TNPU_VADD_FUNCT) || funct_q == TNPU_FUNCT_W'(TNPU_VADDROW_FUNCT)) ? x + y
               : (funct_q == TNPU_FUNCT_W'(TNPU_VMAX_FUNCT)) ? ((x > imm) ? x : imm)
               : (funct_q == TNPU_FUNCT_W'(TNPU_VMIN_FUNCT)) ? ((x < imm) ? x : imm)
               : (funct_q == TNPU_FUNCT_W'(TNPU_VMUL_FUNCT)) ? prod[TNPU_ACC_BITS-1:0]
               : (funct_q == TNPU_FUNCT_W'(TNPU_VSHR_FUNCT)) ? TNPU_ACC_BITS'((sx + half) >>> shift_q)
               : (funct_q == TNPU_FUNCT_W'(TNPU_VREQUANT_FUNCT)) ? rq_sat
               : (funct_q == TNPU_FUNCT_W'(TNPU_VREQUANTF_FUNCT)) ? $signed(rqf)
               : x;
    assign dst_wdata_o[l*TNPU_ACC_BITS +: TNPU_ACC_BITS] = res;
  end

  assign comp_o        = occ_last_i;
  assign comp_signal_o = signal_q;
  assign comp_idx_o    = idx_q;

  always_comb begin
    left_d   = left_q;
    funct_d  = funct_q;
    signal_d = signal_q;
    dst_d    = dst_q;
    src_d    = src_q;
    imm_d    = imm_q;
    shift_d  = shift_q;
    idx_d    = idx_q;
    rq_shift_d = rq_shift_q;
    if (left_q != '0) begin
      left_d = left_q - 1'b1;
      dst_d  = dst_q + 1'b1;
      // Fixed source rows (a broadcast row, parameter rows: TNPU_ALU_SRC_FIXED, from the YAML) stay put
      // for every destination row; any other source walks with the destination.
      if (!TNPU_ALU_SRC_FIXED[funct_q]) begin
        src_d = src_q + 1'b1;
      end
    end
    if (start_i) begin
      left_d   = rows;
      funct_d  = head_funct;
      signal_d = head_signal;
      dst_d    = head_dst;
      src_d    = head_src;
      imm_d    = head_imm;
      shift_d  = head_shift;
      idx_d    = head_idx;
      if (rq_start) rq_shift_d = src_shifts;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
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
      left_q   <= left_d;
      funct_q  <= funct_d;
      signal_q <= signal_d;
      dst_q    <= dst_d;
      src_q    <= src_d;
      imm_q    <= imm_d;
      shift_q  <= shift_d;
      idx_q    <= idx_d;
      rq_shift_q <= rq_shift_d;
    end
  end
endmodule

`default_nettype wire
