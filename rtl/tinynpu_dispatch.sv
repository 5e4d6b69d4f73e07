// Fetch, decode, check and dispatch: at most one instruction per cycle, in
// program order.  A queued instruction is pushed into its unit's queue when
// that queue is not full; sync and halt are executed here once every earlier
// instruction has completed (outstanding count zero).  Every check a word can
// fail is made at dispatch and stops the machine with an error cause.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_dispatch #(
  parameter int IMEM_AW = 14,
  parameter int IDX_W = 16
) (
  input  wire logic               clk_i,
  input  wire logic               rst_ni,
  input  wire logic               start_i,
  input  wire logic [IMEM_AW:0]   prog_len_i,
  output logic      [IMEM_AW-1:0] imem_raddr_o,
  input  wire logic [127:0]       imem_rdata_i,
  input  wire logic [3:0]         q_full_i,
  output logic      [3:0]         q_push_o,
  output logic      [IDX_W+127:0] q_data_o,
  input  wire logic [3:0]         comp_i,
  input  wire logic               token_overflow_i,
  input  wire logic               dram_stall_i,
  output logic                    disp_o,
  output logic      [IDX_W-1:0]   disp_idx_o,
  output logic                    busy_o,
  output logic                    done_o,
  output logic                    error_o,
  output logic      [3:0]         error_cause_o,
  output logic      [IDX_W-1:0]   error_pc_o,
  output logic      [31:0]        cycles_o
);
  `include "tinynpu_isa.vh"

  // Error causes (mirrored in rtl/cosim.py: ERROR_CAUSES).
  localparam logic [3:0] ErrUndecodable   = 4'd1;
  localparam logic [3:0] ErrBadField      = 4'd2;
  localparam logic [3:0] ErrSpadRange     = 4'd3;
  localparam logic [3:0] ErrDramRange     = 4'd4;
  localparam logic [3:0] ErrSelfToken     = 4'd5;
  localparam logic [3:0] ErrTokenOverflow = 4'd6;
  localparam logic [3:0] ErrPcEnd         = 4'd7;
  localparam logic [3:0] ErrDramStall     = 4'd8;

  typedef enum logic [1:0] {StIdle, StRun, StDone, StError} state_e;
  state_e           state_q;
  logic [IMEM_AW:0] pc_q;
  logic [15:0]      outstanding_q;
  logic [31:0]      cycle_q;
  logic [3:0]       cause_q;
  logic [IDX_W-1:0] err_pc_q;

  logic [127:0] w;
  assign imem_raddr_o = pc_q[IMEM_AW-1:0];
  assign w = imem_rdata_i;

  function automatic logic word_is(input logic [127:0] word, input logic [127:0] mask,
                                   input logic [127:0] match);
    word_is = ((word & mask) == match);
  endfunction

  logic is_halt, is_sync, is_load, is_zero, is_store, is_tmm, is_alu;
  assign is_halt  = word_is(w, TNPU_HALT_MASK, TNPU_HALT_MATCH);
  assign is_sync  = word_is(w, TNPU_SYNC_MASK, TNPU_SYNC_MATCH);
  assign is_load  = word_is(w, TNPU_LOAD_MASK, TNPU_LOAD_MATCH);
  assign is_zero  = word_is(w, TNPU_ZERO_MASK, TNPU_ZERO_MATCH);
  assign is_store = word_is(w, TNPU_STORE_MASK, TNPU_STORE_MATCH);
  assign is_tmm   = word_is(w, TNPU_TMM_MASK, TNPU_TMM_MATCH);
  assign is_alu   = word_is(w, TNPU_VADD_MASK, TNPU_VADD_MATCH) || word_is(w, TNPU_VADDROW_MASK, TNPU_VADDROW_MATCH)
                    || word_is(w, TNPU_VMAX_MASK, TNPU_VMAX_MATCH) || word_is(w, TNPU_VMIN_MASK, TNPU_VMIN_MATCH)
                    || word_is(w, TNPU_VMUL_MASK, TNPU_VMUL_MATCH) || word_is(w, TNPU_VSHR_MASK, TNPU_VSHR_MATCH)
                    || vrequant;

  // ---- operand fields (positions shared by every instruction that has them) ----
  logic [1:0]  scope;
  logic [TNPU_LOAD_SP_ROW_W-1:0] sp_row, alu_src;
  logic [TNPU_LOAD_DRAM_W-1:0] dram;
  logic [TNPU_LOAD_STRIDE_W-1:0] stride;
  logic [TNPU_LOAD_ROWS_W-1:0] rows;
  logic [4:0]  cols, shift;
  logic        narrow, vaddrow, vadd, vrequant;
  logic [3:0]  wait_m, signal_m;
  logic [9:0]  t_acc, t_a, t_b;
  logic [6:0]  m, n, k;
  assign scope    = w[TNPU_LOAD_SCOPE_LSB +: TNPU_LOAD_SCOPE_W];
  assign sp_row   = w[TNPU_LOAD_SP_ROW_LSB +: TNPU_LOAD_SP_ROW_W];
  assign dram     = w[TNPU_LOAD_DRAM_LSB +: TNPU_LOAD_DRAM_W];
  assign stride   = w[TNPU_LOAD_STRIDE_LSB +: TNPU_LOAD_STRIDE_W];
  assign rows     = w[TNPU_LOAD_ROWS_LSB +: TNPU_LOAD_ROWS_W];
  assign cols     = w[TNPU_LOAD_COLS_LSB +: TNPU_LOAD_COLS_W];
  assign narrow   = w[TNPU_STORE_NARROW_LSB];
  assign shift    = w[TNPU_STORE_SHIFT_LSB +: TNPU_STORE_SHIFT_W];
  assign alu_src  = w[TNPU_VADD_SRC_LSB +: TNPU_VADD_SRC_W];
  assign vaddrow  = word_is(w, TNPU_VADDROW_MASK, TNPU_VADDROW_MATCH);
  assign vadd     = word_is(w, TNPU_VADD_MASK, TNPU_VADD_MATCH);
  assign vrequant = word_is(w, TNPU_VREQUANT_MASK, TNPU_VREQUANT_MATCH);
  assign wait_m   = w[TNPU_LOAD_WAIT_LSB +: TNPU_LOAD_WAIT_W];
  assign signal_m = w[TNPU_LOAD_SIGNAL_LSB +: TNPU_LOAD_SIGNAL_W];
  assign t_acc    = w[TNPU_TMM_ACC_LSB +: TNPU_TMM_ACC_W];
  assign t_a      = w[TNPU_TMM_A_LSB +: TNPU_TMM_A_W];
  assign t_b      = w[TNPU_TMM_B_LSB +: TNPU_TMM_B_W];
  assign m        = w[TNPU_TMM_M_LSB +: TNPU_TMM_M_W];
  assign n        = w[TNPU_TMM_N_LSB +: TNPU_TMM_N_W];
  assign k        = w[TNPU_TMM_K_LSB +: TNPU_TMM_K_W];

  logic [1:0] unit;  // queued unit of a load/zero/tmm/alu/store
  assign unit = (is_load || is_zero) ? 2'(TNPU_UNIT_LOAD) : is_tmm ? 2'(TNPU_UNIT_TENSOR)
              : is_alu ? 2'(TNPU_UNIT_ALU) : 2'(TNPU_UNIT_STORE);
  logic queued;
  assign queued = is_load || is_zero || is_store || is_tmm || is_alu;

  // ---- checks ------------------------------------------------------------
  logic [31:0] scope_rows, elem_bytes, out_bytes;
  logic [39:0] dram_end;  // one past the last byte touched, without overflow
  logic bad_field, bad_spad, bad_dram, bad_self;
  assign scope_rows = (scope == 2'(TNPU_SCOPE_A)) ? TNPU_A_REG_ROWS : (scope == 2'(TNPU_SCOPE_B)) ? TNPU_B_REG_ROWS
                    : TNPU_ACC_ROWS;
  assign elem_bytes = (scope == 2'(TNPU_SCOPE_ACC)) ? TNPU_ACC_ELEM_BYTES : TNPU_A_REG_ELEM_BYTES;
  assign out_bytes  = narrow ? 32'd1 : TNPU_ACC_ELEM_BYTES;
  assign dram_end   = 40'(dram) + (40'(rows) - 40'd1) * 40'(stride)
                    + 40'(cols) * (is_store ? 40'(out_bytes) : 40'(elem_bytes));

  always @* begin
    bad_field = 1'b0;
    if ((is_load || is_zero || is_store || is_alu) && rows == '0) bad_field = 1'b1;
    if ((is_load || is_store) && (cols == '0 || int'(cols) > TNPU_TILE)) bad_field = 1'b1;
    if ((is_load || is_zero) && scope > 2'(TNPU_SCOPE_ACC)) bad_field = 1'b1;
    if (is_tmm && (m == '0 || n == '0 || k == '0)) bad_field = 1'b1;
    if (is_store && !narrow && shift != '0) bad_field = 1'b1;
  end

  always @* begin
    bad_spad = 1'b0;
    if ((is_load || is_zero) && 32'(sp_row) + 32'(rows) > scope_rows) bad_spad = 1'b1;
    if ((is_store || is_alu) && 32'(sp_row) + 32'(rows) > TNPU_ACC_ROWS) bad_spad = 1'b1;
    if (is_tmm && ((32'(t_acc) + 32'(m) * 32'(n)) * TNPU_TILE > TNPU_ACC_ROWS
                   || (32'(t_a) + 32'(m) * 32'(k)) * TNPU_TILE > TNPU_A_REG_ROWS
                   || (32'(t_b) + 32'(n) * 32'(k)) * TNPU_TILE > TNPU_B_REG_ROWS)) bad_spad = 1'b1;
    if (vadd && (32'(alu_src) + 32'(rows) > TNPU_ACC_ROWS
                 || (alu_src != sp_row && 32'(alu_src) + 32'(rows) > 32'(sp_row)
                     && 32'(sp_row) + 32'(rows) > 32'(alu_src)))) bad_spad = 1'b1;
    if (vaddrow && (32'(alu_src) >= TNPU_ACC_ROWS
                    || (alu_src >= sp_row && 32'(alu_src) < 32'(sp_row) + 32'(rows)))) bad_spad = 1'b1;
    // vrequant's two parameter rows (multiplier, shift) lie in acc and outside the destination rows
    if (vrequant && (32'(alu_src) + 32'd2 > TNPU_ACC_ROWS
                     || (32'(alu_src) + 32'd1 >= 32'(sp_row) && 32'(alu_src) < 32'(sp_row) + 32'(rows))))
      bad_spad = 1'b1;
  end

  always @* begin
    bad_dram = 1'b0;
    if ((is_load || is_store) && dram_end > 40'(TNPU_DRAM_BYTES)) bad_dram = 1'b1;
    // Row addresses must be aligned to the element size (every row: address and stride).
    if (is_load && ((dram % elem_bytes) != 0 || (32'(stride) % elem_bytes) != 0)) bad_dram = 1'b1;
    if (is_store && ((dram % out_bytes) != 0 || (32'(stride) % out_bytes) != 0)) bad_dram = 1'b1;
  end

  assign bad_self = queued && (wait_m[unit] || signal_m[unit]);

  logic       decodable;
  logic [3:0] check_cause;
  assign decodable   = is_halt || is_sync || queued;
  assign check_cause = !decodable ? ErrUndecodable : bad_field ? ErrBadField : bad_spad ? ErrSpadRange
                     : bad_dram ? ErrDramRange : bad_self ? ErrSelfToken : 4'd0;

  // ---- dispatch ----------------------------------------------------------
  logic running, at_end, can_push, drained, dispatch;
  assign running  = (state_q == StRun);
  assign at_end   = (pc_q >= prog_len_i);
  assign drained  = (outstanding_q == '0);
  assign can_push = queued && !q_full_i[unit];
  assign dispatch = running && !at_end && check_cause == '0 && !token_overflow_i && !dram_stall_i
                    && (can_push || ((is_sync || is_halt) && drained));

  assign q_push_o   = (dispatch && queued) ? (4'b1 << unit) : 4'b0;
  assign q_data_o   = {IDX_W'(pc_q), w};
  assign disp_o     = dispatch;
  assign disp_idx_o = IDX_W'(pc_q);

  logic [15:0] comps;
  assign comps = 16'(comp_i[0]) + 16'(comp_i[1]) + 16'(comp_i[2]) + 16'(comp_i[3]);

  always @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q       <= StIdle;
      pc_q          <= '0;
      outstanding_q <= '0;
      cycle_q       <= '0;
      cause_q       <= '0;
      err_pc_q      <= '0;
    end else begin
      outstanding_q <= outstanding_q + 16'(dispatch && queued) - comps;
      case (state_q)
        StIdle: if (start_i) begin
          state_q <= StRun;
          pc_q    <= '0;
          cycle_q <= '0;
        end
        StRun: begin
          cycle_q <= cycle_q + 1'b1;
          if (token_overflow_i || dram_stall_i) begin
            state_q  <= StError;
            cause_q  <= token_overflow_i ? ErrTokenOverflow : ErrDramStall;
            err_pc_q <= IDX_W'(pc_q);
          end else if (at_end) begin
            state_q  <= StError;
            cause_q  <= ErrPcEnd;
            err_pc_q <= IDX_W'(pc_q);
          end else if (check_cause != '0) begin
            state_q  <= StError;
            cause_q  <= check_cause;
            err_pc_q <= IDX_W'(pc_q);
          end else if (dispatch) begin
            pc_q <= pc_q + 1'b1;
            if (is_halt) state_q <= StDone;
          end
        end
        default: ;
      endcase
    end
  end

  assign busy_o        = running;
  assign done_o        = (state_q == StDone);
  assign error_o       = (state_q == StError);
  assign error_cause_o = cause_q;
  assign error_pc_o    = err_pc_q;
  assign cycles_o      = cycle_q;
endmodule

`default_nettype wire
