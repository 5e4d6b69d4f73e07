// The load unit: DMA loads (DRAM -> a_reg/b_reg/acc) and zero fills.
//
// A load that starts in cycle s issues one read request per row, row r in
// cycle s + 1 + r*beats_row, and holds the DRAM port for rows*beats_row
// cycles (its occupancy), so the next load may start while earlier rows are
// still in flight.  Each request carries a tag (destination row, columns,
// last-row flag, signal mask, instruction index) that the DRAM echoes with the
// data; the response of the last row is the completion pulse (cycle e - 1).
// A zero starts only when every earlier load has completed and writes one
// row per cycle, s + 1 .. s + rows; its completion pulse is in cycle s + rows - 1.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_load_unit import tinynpu_isa_pkg::*; #(
  parameter int IdxW = 16,
  // the read tag: {index, last row, signal, scope, scratchpad row, columns}
  localparam int TagW = IdxW + 1 + TNPU_SIGNAL_W + TNPU_LOAD_SCOPE_W + TNPU_LOAD_SP_ROW_W + TNPU_LOAD_COLS_W
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
  output logic                                head_hold_o,
  output logic                                head_port_o,
  // DRAM read channel
  output logic                                rd_req_valid_o,
  input  wire logic                           rd_req_ready_i,
  output logic      [TNPU_LOAD_DRAM_W-1:0]    rd_req_addr_o,
  output logic      [TNPU_ROW_BYTES_BITS-1:0] rd_req_bytes_o,
  output logic      [TagW-1:0]                rd_req_tag_o,
  input  wire logic                           rd_resp_valid_i,
  input  wire logic [TNPU_ACC_ROW_WIDTH-1:0]  rd_resp_data_i,
  input  wire logic [TagW-1:0]                rd_resp_tag_i,
  // scratchpad write port
  output logic                                wr_valid_o,
  output logic      [TNPU_LOAD_SCOPE_W-1:0]   wr_scope_o,
  output logic      [TNPU_LOAD_SP_ROW_W-1:0]  wr_row_o,
  output logic      [TNPU_ACC_ROW_WIDTH-1:0]  wr_data_o,
  // completion and interface error
  output logic                                comp_o,
  output logic      [TNPU_SIGNAL_W-1:0]       comp_signal_o,
  output logic      [IdxW-1:0]                comp_idx_o,
  output logic                                stall_err_o
);
  // ---- head decode (zero shares scope/sp_row/rows with load: checked by the generator test) ----
  logic [IdxW-1:0]                head_idx;
  logic                           is_zero;
  logic [TNPU_SIGNAL_W-1:0]       signal_m;
  logic [TNPU_LOAD_SCOPE_W-1:0]   scope;
  logic [TNPU_LOAD_SP_ROW_W-1:0]  sp_row;
  logic [TNPU_LOAD_ROWS_W-1:0]    rows;
  logic [TNPU_LOAD_COLS_W-1:0]    cols;
  logic [TNPU_ROW_BYTES_BITS-1:0] row_bytes, beats_row;

  assign head_idx  = head_i[TNPU_WORD_BITS +: IdxW];
  assign is_zero   = (head_i[TNPU_OPCODE_LSB +: TNPU_OPCODE_W] == TNPU_OPCODE_W'(TNPU_ZERO_OPCODE));
  assign signal_m  = head_i[TNPU_SIGNAL_LSB +: TNPU_SIGNAL_W];
  assign scope     = head_i[TNPU_LOAD_SCOPE_LSB +: TNPU_LOAD_SCOPE_W];
  assign sp_row    = head_i[TNPU_LOAD_SP_ROW_LSB +: TNPU_LOAD_SP_ROW_W];
  assign rows      = head_i[TNPU_LOAD_ROWS_LSB +: TNPU_LOAD_ROWS_W];
  assign cols      = head_i[TNPU_LOAD_COLS_LSB +: TNPU_LOAD_COLS_W];
  assign row_bytes = TNPU_ROW_BYTES_BITS'(cols) * ((scope == TNPU_LOAD_SCOPE_W'(TNPU_SCOPE_ACC))
                     ? TNPU_ROW_BYTES_BITS'(TNPU_ACC_ELEM_BYTES) : TNPU_ROW_BYTES_BITS'(TNPU_A_REG_ELEM_BYTES));
  assign beats_row = (row_bytes + TNPU_ROW_BYTES_BITS'(TNPU_DRAM_BYTES_PER_CYCLE - 1))
                     / TNPU_ROW_BYTES_BITS'(TNPU_DRAM_BYTES_PER_CYCLE);

  logic [IdxW:0] inflight_d, inflight_q;  // started, not completed
  assign head_occ_o  = is_zero ? TNPU_OCC_BITS'(rows) : TNPU_OCC_BITS'(rows) * TNPU_OCC_BITS'(beats_row);
  assign head_hold_o = is_zero && (inflight_q != '0);
  assign head_port_o = !is_zero;

  // ---- read requests -------------------------------------------------------
  localparam int InfoW = IdxW + TNPU_SIGNAL_W + TNPU_LOAD_SCOPE_W + TNPU_LOAD_COLS_W + TNPU_ROW_BYTES_BITS;
  logic [IdxW-1:0]                req_idx;
  logic [TNPU_SIGNAL_W-1:0]       req_signal;
  logic [TNPU_LOAD_SCOPE_W-1:0]   req_scope;
  logic [TNPU_LOAD_COLS_W-1:0]    req_cols;
  logic [TNPU_LOAD_SP_ROW_W-1:0]  req_row;
  logic                           req_last;

  tinynpu_dma_rows #(.InfoW(InfoW)) u_rows (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .start_i    (start_i && !is_zero),
    .rows_i     (rows),
    .beats_row_i(beats_row),
    .addr_i     (head_i[TNPU_LOAD_DRAM_LSB +: TNPU_LOAD_DRAM_W]),
    .stride_i   (head_i[TNPU_LOAD_STRIDE_LSB +: TNPU_LOAD_STRIDE_W]),
    .row_i      (sp_row),
    .info_i     ({head_idx, signal_m, scope, cols, row_bytes}),
    .req_valid_o(rd_req_valid_o),
    .req_ready_i(rd_req_ready_i),
    .req_addr_o (rd_req_addr_o),
    .req_row_o  (req_row),
    .req_last_o (req_last),
    .req_info_o ({req_idx, req_signal, req_scope, req_cols, rd_req_bytes_o})
  );
  assign rd_req_tag_o = {req_idx, req_last, req_signal, req_scope, req_row, req_cols};
  assign stall_err_o  = rd_req_valid_o && !rd_req_ready_i;

  // ---- zero fill ---------------------------------------------------------
  logic                          zero_active_d, zero_active_q;
  logic [TNPU_ZERO_ROWS_W-1:0]   zero_left_d, zero_left_q;
  logic [TNPU_ZERO_SP_ROW_W-1:0] zero_row_d, zero_row_q;
  logic [TNPU_LOAD_SCOPE_W-1:0]  zero_scope_d, zero_scope_q;
  logic [TNPU_SIGNAL_W-1:0]      zero_signal_d, zero_signal_q;
  logic [IdxW-1:0]               zero_idx_d, zero_idx_q;

  // ---- responses and completion --------------------------------------------
  logic [IdxW-1:0]                r_idx;
  logic                           r_last;
  logic [TNPU_SIGNAL_W-1:0]       r_signal;
  logic [TNPU_LOAD_SCOPE_W-1:0]   r_scope;
  logic [TNPU_LOAD_SP_ROW_W-1:0]  r_row;
  logic [TNPU_LOAD_COLS_W-1:0]    r_cols;
  logic [TNPU_ACC_ROW_WIDTH-1:0]  r_masked;
  logic                           zero_comp_now, zero_comp_fsm;

  assign {r_idx, r_last, r_signal, r_scope, r_row, r_cols} = rd_resp_tag_i;
  // Elements cols..T-1 of a loaded row are written as zero (continuous assigns: Icarus
  // evaluates them faster than an always_comb over the row).
  logic [TNPU_IN_ROW_WIDTH-1:0]  r_in_masked;
  logic [TNPU_ACC_ROW_WIDTH-1:0] r_acc_masked;
  for (genvar l = 0; l < TNPU_TILE; l++) begin : g_lane
    logic keep;
    assign keep = (l < int'(r_cols));
    assign r_in_masked[l*TNPU_INPUT_BITS +: TNPU_INPUT_BITS] =
        keep ? rd_resp_data_i[l*TNPU_INPUT_BITS +: TNPU_INPUT_BITS] : '0;
    assign r_acc_masked[l*TNPU_ACC_BITS +: TNPU_ACC_BITS] =
        keep ? rd_resp_data_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS] : '0;
  end
  assign r_masked = (r_scope == TNPU_LOAD_SCOPE_W'(TNPU_SCOPE_ACC)) ? r_acc_masked
                  : TNPU_ACC_ROW_WIDTH'(r_in_masked);

  assign wr_valid_o = rd_resp_valid_i || zero_active_q;
  assign wr_scope_o = rd_resp_valid_i ? r_scope : zero_scope_q;
  assign wr_row_o   = rd_resp_valid_i ? r_row : zero_row_q;
  assign wr_data_o  = rd_resp_valid_i ? r_masked : '0;

  assign zero_comp_now = start_i && is_zero && (rows == TNPU_LOAD_ROWS_W'(1));
  assign zero_comp_fsm = zero_active_q && (zero_left_q == TNPU_ZERO_ROWS_W'(2));
  assign comp_o        = (rd_resp_valid_i && r_last) || zero_comp_now || zero_comp_fsm;
  assign comp_signal_o = (rd_resp_valid_i && r_last) ? r_signal : zero_comp_now ? signal_m : zero_signal_q;
  assign comp_idx_o    = (rd_resp_valid_i && r_last) ? r_idx : zero_comp_now ? head_idx : zero_idx_q;

  always_comb begin
    inflight_d    = inflight_q + (IdxW + 1)'(start_i) - (IdxW + 1)'(comp_o);
    zero_active_d = zero_active_q;
    zero_left_d   = zero_left_q;
    zero_row_d    = zero_row_q;
    zero_scope_d  = zero_scope_q;
    zero_signal_d = zero_signal_q;
    zero_idx_d    = zero_idx_q;
    if (zero_active_q) begin
      zero_row_d  = zero_row_q + 1'b1;
      zero_left_d = zero_left_q - 1'b1;
      if (zero_left_q == TNPU_ZERO_ROWS_W'(1)) zero_active_d = 1'b0;
    end
    if (start_i && is_zero) begin
      zero_active_d = 1'b1;
      zero_left_d   = rows;
      zero_row_d    = sp_row;
      zero_scope_d  = scope;
      zero_signal_d = signal_m;
      zero_idx_d    = head_idx;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      inflight_q    <= '0;
      zero_active_q <= 1'b0;
      zero_left_q   <= '0;
      zero_row_q    <= '0;
      zero_scope_q  <= '0;
      zero_signal_q <= '0;
      zero_idx_q    <= '0;
    end else begin
      inflight_q    <= inflight_d;
      zero_active_q <= zero_active_d;
      zero_left_q   <= zero_left_d;
      zero_row_q    <= zero_row_d;
      zero_scope_q  <= zero_scope_d;
      zero_signal_q <= zero_signal_d;
      zero_idx_q    <= zero_idx_d;
    end
  end
endmodule

`default_nettype wire
