// Fetch, decode, check and dispatch: at most one instruction per cycle, in
// program order.  Which unit an instruction goes to comes from the YAML
// (tnpu_unit_of in the generated package); a queued instruction is pushed
// into its unit's queue when that queue is not full; the control unit's sync
// and halt are executed here once every earlier instruction has completed
// (outstanding count zero).  Every check a word can fail is made at dispatch
// and stops the machine with an error cause.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_dispatch import tinynpu_isa_pkg::*; #(
  parameter int ImemAw = 14,
  parameter int IdxW = 16,
  localparam int N = TNPU_NUM_QUEUED_UNITS
) (
  input  wire logic                           clk_i,
  input  wire logic                           rst_ni,
  input  wire logic                           start_i,
  input  wire logic [ImemAw:0]                prog_len_i,
  output logic      [ImemAw-1:0]              imem_raddr_o,
  input  wire logic [TNPU_WORD_BITS-1:0]      imem_rdata_i,
  input  wire logic [N-1:0]                   q_full_i,
  output logic      [N-1:0]                   q_push_o,
  output logic      [IdxW+TNPU_WORD_BITS-1:0] q_data_o,
  input  wire logic [N-1:0]                   comp_i,
  input  wire logic                           token_overflow_i,
  input  wire logic                           dram_stall_i,
  output logic                                disp_o,
  output logic      [IdxW-1:0]                disp_idx_o,
  output logic                                busy_o,
  output logic                                done_o,
  output logic                                error_o,
  output logic      [3:0]                     error_cause_o,
  output logic      [IdxW-1:0]                error_pc_o,
  output logic      [TNPU_CYCLE_BITS-1:0]     cycles_o
);
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
  state_e                     state_d, state_q;
  logic [ImemAw:0]            pc_d, pc_q;
  logic [ImemAw:0]            outstanding_d, outstanding_q;  // dispatched, not completed
  logic [TNPU_CYCLE_BITS-1:0] cycle_d, cycle_q;
  logic [3:0]                 cause_d, cause_q;
  logic [IdxW-1:0]            err_pc_d, err_pc_q;

  logic [TNPU_WORD_BITS-1:0] w;
  assign imem_raddr_o = pc_q[ImemAw-1:0];
  assign w = imem_rdata_i;

  // ---- decode: the unit from the YAML's table; instruction-specific checks below ----
  localparam int QUnitW = (N > 1) ? $clog2(N) : 1;
  logic                      decodable, queued;
  logic [TNPU_UNIT_BITS-1:0] unit;
  logic [QUnitW-1:0]         qunit;  // the queued unit (when queued)
  assign {decodable, unit} = tnpu_unit_of(w);
  assign queued = decodable && (int'(unit) < N);
  assign qunit  = QUnitW'(unit);

  function automatic logic word_is(input logic [TNPU_WORD_BITS-1:0] word, input logic [TNPU_WORD_BITS-1:0] mask,
                                   input logic [TNPU_WORD_BITS-1:0] match);
    return (word & mask) == match;
  endfunction

  logic is_halt, is_sync;
  assign is_halt    = word_is(w, TNPU_HALT_MASK, TNPU_HALT_MATCH);
  assign is_sync    = word_is(w, TNPU_SYNC_MASK, TNPU_SYNC_MATCH);

  // The token fields (one position in every instruction: isa/gen_verilog.py checks).
  logic [N-1:0] wait_m, signal_m;
  assign wait_m   = w[TNPU_WAIT_LSB +: TNPU_WAIT_W];
  assign signal_m = w[TNPU_SIGNAL_LSB +: TNPU_SIGNAL_W];

  // ---- checks ------------------------------------------------------------
  // Every queued instruction's field ranges, static checks and the rows and DRAM bytes it accesses,
  // all generated from the YAML (tnpu_checks, isa/gen_verilog_checks.py): a new instruction needs no
  // line here.
  logic bad_field, bad_spad, bad_dram, bad_self;
  assign {bad_dram, bad_spad, bad_field} = tnpu_checks(w);

  assign bad_self = queued && (wait_m[qunit] || signal_m[qunit]);

  logic [3:0] check_cause;
  assign check_cause = !decodable ? ErrUndecodable : bad_field ? ErrBadField : bad_spad ? ErrSpadRange
                     : bad_dram ? ErrDramRange : bad_self ? ErrSelfToken : 4'd0;

  // ---- dispatch ----------------------------------------------------------
  logic running, at_end, can_push, drained, dispatch;
  assign running  = (state_q == StRun);
  assign at_end   = (pc_q >= prog_len_i);
  assign drained  = (outstanding_q == '0);
  assign can_push = queued && !q_full_i[qunit];
  assign dispatch = running && !at_end && check_cause == '0 && !token_overflow_i && !dram_stall_i
                    && (can_push || ((is_sync || is_halt) && drained));

  assign q_push_o   = (dispatch && queued) ? (N'(1) << qunit) : '0;
  assign q_data_o   = {IdxW'(pc_q), w};
  assign disp_o     = dispatch;
  assign disp_idx_o = IdxW'(pc_q);

  always_comb begin
    state_d       = state_q;
    pc_d          = pc_q;
    cycle_d       = cycle_q;
    cause_d       = cause_q;
    err_pc_d      = err_pc_q;
    outstanding_d = outstanding_q + (ImemAw + 1)'(dispatch && queued);
    for (int u = 0; u < N; u++) outstanding_d = outstanding_d - (ImemAw + 1)'(comp_i[u]);
    case (state_q)
      StIdle: if (start_i) begin
        state_d = StRun;
        pc_d    = '0;
        cycle_d = '0;
      end
      StRun: begin
        cycle_d = cycle_q + 1'b1;
        if (token_overflow_i || dram_stall_i) begin
          state_d  = StError;
          cause_d  = token_overflow_i ? ErrTokenOverflow : ErrDramStall;
          err_pc_d = IdxW'(pc_q);
        end else if (at_end) begin
          state_d  = StError;
          cause_d  = ErrPcEnd;
          err_pc_d = IdxW'(pc_q);
        end else if (check_cause != '0) begin
          state_d  = StError;
          cause_d  = check_cause;
          err_pc_d = IdxW'(pc_q);
        end else if (dispatch) begin
          pc_d = pc_q + 1'b1;
          if (is_halt) state_d = StDone;
        end
      end
      default: ;
    endcase
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      state_q       <= StIdle;
      pc_q          <= '0;
      outstanding_q <= '0;
      cycle_q       <= '0;
      cause_q       <= '0;
      err_pc_q      <= '0;
    end else begin
      state_q       <= state_d;
      pc_q          <= pc_d;
      outstanding_q <= outstanding_d;
      cycle_q       <= cycle_d;
      cause_q       <= cause_d;
      err_pc_q      <= err_pc_d;
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
