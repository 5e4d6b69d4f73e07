// The vector ALU: one accumulator row per cycle.  An op that starts in cycle s
// steps through its rows in cycles s + 1 .. s + steps and occupies the unit for
// steps + alu.latency_cycles cycles (not pipelined across instructions); its
// completion pulse is in the last of them.  steps is the op's timing class
// (isa.yaml): rows (alu); rows * n source rows (alu_reduce: vredmax/vredsum/
// vredsq read one segment per cycle and write a destination row with its
// logical row's last segment); ceil(256/T) table rows into the lookup register,
// then rows (alu_lut); rows * C (alu_recip/alu_rsqrt: the sequential unit
// starts in cycle s itself, so row i's result is written in cycle
// s + (i+1) * C, within the occupancy since the latency is at least 1).
// vrequant reads its shift row through the source port in cycle s (the unit
// is otherwise idle then) and its multiplier row in every row cycle; vrequantf
// reads its scale row in every row cycle.  Each lane has one signed 32 x 32
// multiplier, shared by vmul (x * imm), vrequant (x * M), vrequantf (the
// 24 x 24 significand product of tinynpu_requantf), vmulb (x * block) and
// vredsq (the source lane squared).  Ops are told apart by their ALU
// operation number (tnpu_alu_op: the funct, above it the opcode's offset).
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
  localparam int OpW       = TNPU_ALU_OP_W;
  localparam int NW        = TNPU_VREDSUM_N_W;
  localparam int ColsW     = TNPU_VREDSUM_COLS_W;
  localparam int ShiftW    = TNPU_VREDSUM_SHIFT_W;  // the 6-bit shift; vshr's 5-bit one is zero-extended
  localparam int TableRows = (TNPU_ALU_LUT_ENTRIES + TNPU_TILE - 1) / TNPU_TILE;
  localparam int LutRowW   = $clog2(TableRows);

  // A WideW-bit value saturated to the accumulator's width.
  function automatic logic signed [TNPU_ACC_BITS-1:0] sat_acc(input logic signed [2*TNPU_ACC_BITS-1:0] v);
    logic fits;
    fits = (v[2*TNPU_ACC_BITS-1:TNPU_ACC_BITS-1] == '0) || (v[2*TNPU_ACC_BITS-1:TNPU_ACC_BITS-1] == '1);
    return fits ? v[TNPU_ACC_BITS-1:0] : {v[2*TNPU_ACC_BITS-1], {(TNPU_ACC_BITS - 1){~v[2*TNPU_ACC_BITS-1]}}};
  endfunction

  // ---- the queue head ----
  logic [IdxW-1:0]              head_idx;
  logic [OpW-1:0]               head_op;
  logic [TNPU_VADD_ROWS_W-1:0]  rows;
  logic [TNPU_SIGNAL_W-1:0]     head_signal;
  logic [TNPU_VADD_DST_W-1:0]   head_dst, head_src;
  logic [TNPU_VMAX_IMM_W-1:0]   head_imm;
  logic [ShiftW-1:0]            head_shift;
  logic [NW-1:0]                head_n;
  logic [ColsW-1:0]             head_cols;
  assign head_idx    = head_i[TNPU_WORD_BITS +: IdxW];
  assign head_op     = tnpu_alu_op(head_i[TNPU_WORD_BITS-1:0]);
  assign rows        = head_i[TNPU_VADD_ROWS_LSB +: TNPU_VADD_ROWS_W];
  assign head_signal = head_i[TNPU_SIGNAL_LSB +: TNPU_SIGNAL_W];
  assign head_dst    = head_i[TNPU_VADD_DST_LSB +: TNPU_VADD_DST_W];
  assign head_src    = head_i[TNPU_VADD_SRC_LSB +: TNPU_VADD_SRC_W];
  assign head_n      = head_i[TNPU_VREDSUM_N_LSB +: NW];
  assign head_cols   = head_i[TNPU_VREDSUM_COLS_LSB +: ColsW];
  // vlut's base and the other ops' imm share one register; so do the two widths of shift.
  assign head_imm    = (head_op == OpW'(TNPU_VLUT_ALU_OP)) ? head_i[TNPU_VLUT_BASE_LSB +: TNPU_VLUT_BASE_W]
                                                          : head_i[TNPU_VMAX_IMM_LSB +: TNPU_VMAX_IMM_W];
  assign head_shift  = (head_op == OpW'(TNPU_VSHR_ALU_OP)) ? ShiftW'(head_i[TNPU_VSHR_SHIFT_LSB +: TNPU_VSHR_SHIFT_W])
                                                          : head_i[TNPU_VREDSUM_SHIFT_LSB +: ShiftW];
  logic head_recip, head_rsqrt, rq_start, rr_head_start;
  assign head_recip    = (head_op == OpW'(TNPU_VRECIP_ALU_OP));
  assign head_rsqrt    = (head_op == OpW'(TNPU_VRSQRT_ALU_OP));
  assign rq_start      = start_i && (head_op == OpW'(TNPU_VREQUANT_ALU_OP));
  assign rr_head_start = start_i && (head_recip || head_rsqrt);

  // Occupancy by timing class (rows_per_cycle is 1 in the RTL: the co-simulation refuses other configs).
  logic [TNPU_OCC_BITS-1:0] head_steps;
  assign head_steps = TNPU_ALU_SRC_SEGMENTS[head_op] ? TNPU_OCC_BITS'(rows) * TNPU_OCC_BITS'(head_n)
                    : TNPU_ALU_SRC_TABLE[head_op]    ? TNPU_OCC_BITS'(rows) + TNPU_OCC_BITS'(TableRows)
                    : head_recip ? TNPU_OCC_BITS'(rows) * TNPU_OCC_BITS'(TNPU_ALU_RECIP_CYCLES_PER_ROW)
                    : head_rsqrt ? TNPU_OCC_BITS'(rows) * TNPU_OCC_BITS'(TNPU_ALU_RSQRT_CYCLES_PER_ROW)
                    : TNPU_OCC_BITS'(rows);
  assign head_occ_o = head_steps + TNPU_OCC_BITS'(TNPU_ALU_LATENCY);

  // ---- the running op ----
  logic [TNPU_VADD_ROWS_W-1:0] left_d, left_q;  // destination rows still to write
  logic [OpW-1:0]              op_d, op_q;
  logic [TNPU_SIGNAL_W-1:0]    signal_d, signal_q;
  logic [TNPU_VADD_DST_W-1:0]  dst_d, dst_q, src_d, src_q, row_src_d, row_src_q;
  logic [TNPU_VMAX_IMM_W-1:0]  imm_d, imm_q;
  logic [ShiftW-1:0]           shift_d, shift_q;
  logic [IdxW-1:0]             idx_d, idx_q;
  logic [NW-1:0]               n_d, n_q, seg_d, seg_q;  // segments per logical row; the current one
  logic [ColsW-1:0]            cols_d, cols_q;
  logic [TNPU_TILE_BITS-1:0]   blk_d, blk_q;          // a block op's row within the block (wraps at T)
  logic [LutRowW:0]            tbl_d, tbl_q;          // table rows still to copy into the lookup register
  logic [TNPU_TILE*TNPU_VSHR_SHIFT_W-1:0] rq_shift_d, rq_shift_q;  // vrequant: each lane's shift S

  logic segments, block, lut_op, seq, active, seg_last, rr_done, rr_start;
  assign segments = TNPU_ALU_SRC_SEGMENTS[op_q];
  assign block    = TNPU_ALU_SRC_BLOCK[op_q];
  assign lut_op   = TNPU_ALU_SRC_TABLE[op_q];
  assign seq      = (op_q == OpW'(TNPU_VRECIP_ALU_OP)) || (op_q == OpW'(TNPU_VRSQRT_ALU_OP));
  assign active   = (left_q != '0);
  assign seg_last = (seg_q == n_q - 1'b1);
  // The sequential unit's next row starts in the cycle the previous row's result is written.
  assign rr_start = rr_head_start || (active && seq && rr_done && left_q != TNPU_VADD_ROWS_W'(1));

  assign dst_addr_o = TNPU_ACC_ADDR_BITS'(dst_q);
  assign src_addr_o = rq_start      ? TNPU_ACC_ADDR_BITS'(head_src + 1'b1)
                    : rr_head_start ? TNPU_ACC_ADDR_BITS'(head_src)
                    : block         ? TNPU_ACC_ADDR_BITS'(src_q + TNPU_VADD_DST_W'(blk_q))
                    : TNPU_ACC_ADDR_BITS'(src_q);
  assign dst_we_o   = active && (segments ? seg_last : lut_op ? (tbl_q == '0) : seq ? rr_done : 1'b1);

  // ---- the units of the transformer ops ----
  logic [TNPU_ACC_BITS-1:0]       red_result, rr_result;
  logic [TNPU_ACC_ROW_WIDTH-1:0]  lut_y;
  logic [2*TNPU_ACC_ROW_WIDTH-1:0] squares;
  tinynpu_alu_reduce u_reduce (
    .clk_i, .rst_ni,
    .step_i   (active && segments),
    .first_i  (seg_q == '0),
    .last_i   (seg_last),
    .max_i    (op_q == OpW'(TNPU_VREDMAX_ALU_OP)),
    .sq_i     (op_q == OpW'(TNPU_VREDSQ_ALU_OP)),
    .cols_i   (cols_q),
    .shift_i  (shift_q),
    // Operand isolation: the reduction and the lookups see zeros unless their op runs, so neither
    // toggles (nor costs Icarus an evaluation) in the other ops' cycles.
    .row_i    (segments ? src_rdata_i : '0),
    .squares_i(segments ? squares : '0),
    .result_o (red_result)
  );
  tinynpu_lut #(.Entries(TNPU_ALU_LUT_ENTRIES)) u_lut (
    .clk_i,
    .wr_en_i  (active && lut_op && tbl_q != '0),
    .wr_row_i (LutRowW'(TableRows - int'(tbl_q))),
    .wr_data_i(src_rdata_i),
    .x_i      (lut_op ? dst_rdata_i : '0),
    .base_i   (imm_q),
    .y_o      (lut_y)
  );
  tinynpu_recip_rsqrt #(
    .RecipCycles(TNPU_ALU_RECIP_CYCLES_PER_ROW),
    .RsqrtCycles(TNPU_ALU_RSQRT_CYCLES_PER_ROW),
    .ShiftW     (ShiftW)
  ) u_recip_rsqrt (
    .clk_i, .rst_ni,
    .start_i(rr_start),
    .rsqrt_i(start_i ? head_rsqrt : (op_q == OpW'(TNPU_VRSQRT_ALU_OP))),
    .x_i    (src_rdata_i[TNPU_ACC_BITS-1:0]),  // column 0 of the row on the source port
    .shift_i(start_i ? head_shift : shift_q),
    .done_o (rr_done),
    .r_o    (rr_result)
  );

  // ---- the lanes ----
  localparam int WideW = 2 * TNPU_ACC_BITS;  // an exact product
  logic [TNPU_TILE*TNPU_VSHR_SHIFT_W-1:0] src_shifts;  // the low bits of each lane of the source row
  for (genvar l = 0; l < TNPU_TILE; l++) begin : g_lane
    logic signed [TNPU_ACC_BITS-1:0] x, y, imm, res;
    logic signed [TNPU_ACC_BITS:0]   sx, half;
    assign x    = $signed(dst_rdata_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS]);
    assign y    = $signed(src_rdata_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS]);
    assign imm  = $signed(imm_q);
    assign sx   = {x[TNPU_ACC_BITS-1], x};
    assign src_shifts[l*TNPU_VSHR_SHIFT_W +: TNPU_VSHR_SHIFT_W] = src_rdata_i[l*TNPU_ACC_BITS +: TNPU_VSHR_SHIFT_W];
    assign half = $signed(((TNPU_ACC_BITS + 1)'(1) << shift_q) >> 1);
    // The lane's multiplier: x * imm (vmul), x * M (vrequant), the significands (vrequantf), x * block
    // row (vmulb), y * y (vredsq's square of the source lane, summed by tinynpu_alu_reduce).
    logic signed [TNPU_ACC_BITS-1:0] mul_a, mul_b;
    logic signed [WideW-1:0]         prod;
    logic [23:0]                     rqf_mant_a, rqf_mant_b;
    logic [TNPU_ACC_BITS-1:0]        rqf;
    assign mul_a = (op_q == OpW'(TNPU_VREQUANTF_ALU_OP)) ? TNPU_ACC_BITS'(rqf_mant_a)
                 : (op_q == OpW'(TNPU_VREDSQ_ALU_OP)) ? y : x;
    assign mul_b = (op_q == OpW'(TNPU_VREQUANTF_ALU_OP)) ? TNPU_ACC_BITS'(rqf_mant_b)
                 : (op_q == OpW'(TNPU_VMUL_ALU_OP)) ? imm : y;
    assign prod  = mul_a * mul_b;
    assign squares[l*WideW +: WideW] = prod;
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
    logic [TNPU_VSHR_SHIFT_W-1:0]    rq_s;
    logic signed [TNPU_ACC_BITS-1:0] rq_sat, mb_sat;
    assign rq_s   = rq_shift_q[l*TNPU_VSHR_SHIFT_W +: TNPU_VSHR_SHIFT_W];
    assign rq     = (prod + (WideW'(1) <<< (30 + int'(rq_s)))) >>> (31 + int'(rq_s));
    assign rq_sat = sat_acc(WideW'(rq));
    // vmulb: (x * y + 2^shift / 2) >>> shift in one bit more than the product (shift 63 cannot wrap it).
    /* verilator lint_off UNUSEDSIGNAL */  // mb's top bit only keeps the sum from wrapping
    logic signed [WideW:0] mb;
    /* verilator lint_on UNUSEDSIGNAL */
    // (a concatenation is unsigned: without $signed, >>> would shift a negative product in zeros)
    assign mb     = $signed({prod[WideW-1], prod} + (((WideW + 1)'(1) << shift_q) >> 1)) >>> shift_q;
    assign mb_sat = sat_acc(mb[WideW-1:0]);  // |mb| <= 2^62: the top bit is a copy of the sign
    // A continuous assign: Icarus evaluates it faster than an always_comb per lane.
    assign res = (op_q == OpW'(TNPU_VADD_ALU_OP) || op_q == OpW'(TNPU_VADDROW_ALU_OP)) ? x + y
               : (op_q == OpW'(TNPU_VMAX_ALU_OP)) ? ((x > imm) ? x : imm)
               : (op_q == OpW'(TNPU_VMIN_ALU_OP)) ? ((x < imm) ? x : imm)
               : (op_q == OpW'(TNPU_VMUL_ALU_OP)) ? prod[TNPU_ACC_BITS-1:0]
               : (op_q == OpW'(TNPU_VSHR_ALU_OP)) ? TNPU_ACC_BITS'((sx + half) >>> shift_q)
               : (op_q == OpW'(TNPU_VREQUANT_ALU_OP)) ? rq_sat
               : (op_q == OpW'(TNPU_VREQUANTF_ALU_OP)) ? $signed(rqf)
               : (op_q == OpW'(TNPU_VREDMAX_ALU_OP) || op_q == OpW'(TNPU_VREDSUM_ALU_OP)
                  || op_q == OpW'(TNPU_VREDSQ_ALU_OP)) ? $signed(red_result)
               : (op_q == OpW'(TNPU_VSUBB_ALU_OP)) ? x - y
               : (op_q == OpW'(TNPU_VMULB_ALU_OP)) ? mb_sat
               : (op_q == OpW'(TNPU_VLUT_ALU_OP)) ? $signed(lut_y[l*TNPU_ACC_BITS +: TNPU_ACC_BITS])
               : (op_q == OpW'(TNPU_VRECIP_ALU_OP) || op_q == OpW'(TNPU_VRSQRT_ALU_OP)) ? $signed(rr_result)
               : x;
    assign dst_wdata_o[l*TNPU_ACC_BITS +: TNPU_ACC_BITS] = res;
  end

  assign comp_o        = occ_last_i;
  assign comp_signal_o = signal_q;
  assign comp_idx_o    = idx_q;

  always_comb begin
    {left_d, op_d, signal_d, dst_d, src_d, row_src_d} = {left_q, op_q, signal_q, dst_q, src_q, row_src_q};
    {imm_d, shift_d, idx_d, n_d, seg_d, cols_d, blk_d, tbl_d} = {imm_q, shift_q, idx_q, n_q, seg_q, cols_q,
                                                                  blk_q, tbl_q};
    rq_shift_d = rq_shift_q;
    if (active && segments) begin
      // segment j of logical row i is src + i + j*T: the next segment, or the next row's first
      if (seg_last) begin
        seg_d     = '0;
        src_d     = row_src_q + 1'b1;
        row_src_d = row_src_q + 1'b1;
        dst_d     = dst_q + 1'b1;
        left_d    = left_q - 1'b1;
      end else begin
        seg_d = seg_q + 1'b1;
        src_d = src_q + TNPU_VADD_DST_W'(TNPU_TILE);
      end
    end else if (active && lut_op && tbl_q != '0) begin
      tbl_d = tbl_q - 1'b1;  // a table row into the lookup register
      src_d = src_q + 1'b1;
    end else if (active && seq) begin
      if (rr_done) begin
        dst_d  = dst_q + 1'b1;
        src_d  = src_q + 1'b1;
        left_d = left_q - 1'b1;
      end
    end else if (active) begin
      left_d = left_q - 1'b1;
      dst_d  = dst_q + 1'b1;
      blk_d  = blk_q + 1'b1;
      // Fixed source rows (a broadcast row, parameter rows: TNPU_ALU_SRC_FIXED, from the YAML) stay put
      // for every destination row, a block's base too (blk_q walks it); any other source walks.
      if (!TNPU_ALU_SRC_FIXED[op_q] && !block) src_d = src_q + 1'b1;
    end
    if (start_i) begin
      left_d    = rows;
      op_d      = head_op;
      signal_d  = head_signal;
      dst_d     = head_dst;
      // the sequential unit reads head_src now (rr_head_start): its next row is the one after
      src_d     = (head_recip || head_rsqrt) ? head_src + 1'b1 : head_src;
      row_src_d = head_src;
      imm_d     = head_imm;
      shift_d   = head_shift;
      idx_d     = head_idx;
      n_d       = head_n;
      seg_d     = '0;
      cols_d    = head_cols;
      blk_d     = '0;
      tbl_d     = TNPU_ALU_SRC_TABLE[head_op] ? (LutRowW + 1)'(TableRows) : '0;
      if (rq_start) rq_shift_d = src_shifts;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      {left_q, op_q, signal_q, dst_q, src_q, row_src_q} <= '0;
      {imm_q, shift_q, idx_q, n_q, seg_q, cols_q, blk_q, tbl_q} <= '0;
      rq_shift_q <= '0;
    end else begin
      {left_q, op_q, signal_q, dst_q, src_q, row_src_q} <= {left_d, op_d, signal_d, dst_d, src_d, row_src_d};
      {imm_q, shift_q, idx_q, n_q, seg_q, cols_q, blk_q, tbl_q} <= {imm_d, shift_d, idx_d, n_d, seg_d, cols_d,
                                                                    blk_d, tbl_d};
      rq_shift_q <= rq_shift_d;
    end
  end
endmodule

`default_nettype wire
