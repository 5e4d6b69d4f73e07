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

module tinynpu_load_unit #(
  parameter int IDX_W = 16,
  parameter int TAG_W = 42,
  parameter int ROW_W = 512
) (
  input  wire logic                 clk_i,
  input  wire logic                 rst_ni,
  // instruction queue head
  input  wire logic                 q_valid_i,
  input  wire logic [IDX_W+127:0]   q_data_i,
  output logic                      q_pop_o,
  // tokens: tok_avail_i[src] = channel src -> load holds a token
  input  wire logic [3:0]           tok_avail_i,
  output logic      [3:0]           consume_o,
  // DRAM port arbitration
  output logic                      port_req_o,
  output logic      [15:0]          port_beats_o,
  input  wire logic                 port_grant_i,
  // DRAM read channel
  output logic                      rd_req_valid_o,
  input  wire logic                 rd_req_ready_i,
  output logic      [31:0]          rd_req_addr_o,
  output logic      [6:0]           rd_req_bytes_o,
  output logic      [TAG_W-1:0]     rd_req_tag_o,
  input  wire logic                 rd_resp_valid_i,
  input  wire logic [ROW_W-1:0]     rd_resp_data_i,
  input  wire logic [TAG_W-1:0]     rd_resp_tag_i,
  // scratchpad write port
  output logic                      wr_valid_o,
  output logic      [1:0]           wr_scope_o,
  output logic      [13:0]          wr_row_o,
  output logic      [ROW_W-1:0]     wr_data_o,
  // completion, start trace and interface error
  output logic                      comp_o,
  output logic      [3:0]           comp_signal_o,
  output logic      [IDX_W-1:0]     comp_idx_o,
  output logic                      start_o,
  output logic      [IDX_W-1:0]     start_idx_o,
  output logic                      stall_err_o
);
  `include "tinynpu_isa.vh"

  // ---- head decode -------------------------------------------------------
  // The queue entry is the whole word; opcode/funct/reserved bits were checked at dispatch.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [127:0]      word;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [IDX_W-1:0]  idx;
  logic              is_zero;
  logic [3:0]        wait_m, signal_m;
  logic [1:0]        scope;
  logic [TNPU_LOAD_SP_ROW_W-1:0] sp_row;
  logic [TNPU_LOAD_DRAM_W-1:0] dram;
  logic [TNPU_LOAD_STRIDE_W-1:0] stride;
  logic [TNPU_LOAD_ROWS_W-1:0] rows;
  logic [4:0]        cols;
  logic [6:0]        row_bytes;
  logic [2:0]        beats_row;
  logic [15:0]       beats, occ;

  assign word     = q_data_i[127:0];
  assign idx      = q_data_i[IDX_W+127:128];
  assign is_zero  = (word[3:0] == 4'(TNPU_ZERO_OPCODE));
  assign wait_m   = word[TNPU_LOAD_WAIT_LSB +: TNPU_LOAD_WAIT_W];
  assign signal_m = word[TNPU_LOAD_SIGNAL_LSB +: TNPU_LOAD_SIGNAL_W];
  assign scope    = word[TNPU_LOAD_SCOPE_LSB +: TNPU_LOAD_SCOPE_W];
  assign sp_row   = word[TNPU_LOAD_SP_ROW_LSB +: TNPU_LOAD_SP_ROW_W];
  assign dram     = word[TNPU_LOAD_DRAM_LSB +: TNPU_LOAD_DRAM_W];
  assign stride   = word[TNPU_LOAD_STRIDE_LSB +: TNPU_LOAD_STRIDE_W];
  assign rows     = word[TNPU_LOAD_ROWS_LSB +: TNPU_LOAD_ROWS_W];
  assign cols     = word[TNPU_LOAD_COLS_LSB +: TNPU_LOAD_COLS_W];
  // zero shares scope/sp_row/rows positions with load (checked by the generator test).
  assign row_bytes = 7'(cols) * ((scope == 2'(TNPU_SCOPE_ACC)) ? 7'(TNPU_ACC_ELEM_BYTES) : 7'(TNPU_A_REG_ELEM_BYTES));
  assign beats_row = 3'((row_bytes + 7'(TNPU_DRAM_BYTES_PER_CYCLE - 1)) / 7'(TNPU_DRAM_BYTES_PER_CYCLE));
  assign beats     = 16'(rows) * 16'(beats_row);
  assign occ       = is_zero ? 16'(rows) : beats;

  // ---- start -------------------------------------------------------------
  logic [15:0] rem_q;       // occupancy cycles left after this one
  logic [15:0] inflight_q;  // started, not completed
  logic        ready;

  assign ready        = q_valid_i && ((wait_m & ~tok_avail_i) == 4'b0) && (rem_q == '0)
                        && (!is_zero || inflight_q == '0);
  assign port_req_o   = ready && !is_zero;
  assign port_beats_o = beats;
  assign start_o      = ready && (is_zero || port_grant_i);
  assign start_idx_o  = idx;
  assign q_pop_o      = start_o;
  assign consume_o    = start_o ? wait_m : 4'b0;

  // ---- read-request issue ------------------------------------------------
  logic              iss_active_q;
  logic [TNPU_LOAD_ROWS_W-1:0] iss_left_q;
  logic [2:0]        iss_cnt_q, iss_beats_q;
  logic [TNPU_LOAD_DRAM_W-1:0] iss_addr_q;
  logic [TNPU_LOAD_STRIDE_W-1:0] iss_stride_q;
  logic [TNPU_LOAD_SP_ROW_W-1:0] iss_row_q;
  logic [1:0]        iss_scope_q;
  logic [4:0]        iss_cols_q;
  logic [6:0]        iss_bytes_q;
  logic [3:0]        iss_signal_q;
  logic [IDX_W-1:0]  iss_idx_q;

  assign rd_req_valid_o = iss_active_q && (iss_cnt_q == '0);
  assign rd_req_addr_o  = iss_addr_q;
  assign rd_req_bytes_o = iss_bytes_q;
  assign rd_req_tag_o   = {iss_idx_q, (iss_left_q == 12'd1), iss_signal_q, iss_scope_q, iss_row_q, iss_cols_q};
  assign stall_err_o    = rd_req_valid_o && !rd_req_ready_i;

  // ---- zero fill ---------------------------------------------------------
  logic              zero_active_q;
  logic [TNPU_ZERO_ROWS_W-1:0] zero_left_q;
  logic [TNPU_ZERO_SP_ROW_W-1:0] zero_row_q;
  logic [1:0]        zero_scope_q;
  logic [3:0]        zero_signal_q;
  logic [IDX_W-1:0]  zero_idx_q;

  // ---- response / completion --------------------------------------------
  logic [IDX_W-1:0]  r_idx;
  logic              r_last;
  logic [3:0]        r_signal;
  logic [1:0]        r_scope;
  logic [TNPU_LOAD_SP_ROW_W-1:0] r_row;
  logic [4:0]        r_cols;
  logic [ROW_W-1:0]  r_masked;
  logic              zero_comp_now, zero_comp_fsm;

  assign {r_idx, r_last, r_signal, r_scope, r_row, r_cols} = rd_resp_tag_i;
  // Elements cols..15 of a loaded row are written as zero.
  always @* begin
    r_masked = '0;
    for (int l = 0; l < TNPU_TILE; l++) begin
      if (r_scope == 2'(TNPU_SCOPE_ACC)) begin
        if (l < int'(r_cols)) r_masked[l*TNPU_ACC_BITS +: TNPU_ACC_BITS] = rd_resp_data_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS];
      end else begin
        if (l < int'(r_cols)) r_masked[l*TNPU_INPUT_BITS +: TNPU_INPUT_BITS] = rd_resp_data_i[l*TNPU_INPUT_BITS +: TNPU_INPUT_BITS];
      end
    end
  end

  assign wr_valid_o = rd_resp_valid_i || zero_active_q;
  assign wr_scope_o = rd_resp_valid_i ? r_scope : zero_scope_q;
  assign wr_row_o   = rd_resp_valid_i ? r_row : zero_row_q;
  assign wr_data_o  = rd_resp_valid_i ? r_masked : '0;

  assign zero_comp_now = start_o && is_zero && (rows == 12'd1);
  assign zero_comp_fsm = zero_active_q && (zero_left_q == 12'd2);
  assign comp_o        = (rd_resp_valid_i && r_last) || zero_comp_now || zero_comp_fsm;
  assign comp_signal_o = (rd_resp_valid_i && r_last) ? r_signal : zero_comp_now ? signal_m : zero_signal_q;
  assign comp_idx_o    = (rd_resp_valid_i && r_last) ? r_idx : zero_comp_now ? idx : zero_idx_q;

  always @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rem_q         <= '0;
      inflight_q    <= '0;
      iss_active_q  <= 1'b0;
      iss_left_q    <= '0;
      iss_cnt_q     <= '0;
      iss_beats_q   <= '0;
      iss_addr_q    <= '0;
      iss_stride_q  <= '0;
      iss_row_q     <= '0;
      iss_scope_q   <= '0;
      iss_cols_q    <= '0;
      iss_bytes_q   <= '0;
      iss_signal_q  <= '0;
      iss_idx_q     <= '0;
      zero_active_q <= 1'b0;
      zero_left_q   <= '0;
      zero_row_q    <= '0;
      zero_scope_q  <= '0;
      zero_signal_q <= '0;
      zero_idx_q    <= '0;
    end else begin
      inflight_q <= inflight_q + 16'(start_o) - 16'(comp_o);
      if (rem_q != '0) rem_q <= rem_q - 1'b1;
      // issue one row request every beats_row cycles
      if (iss_active_q) begin
        if (iss_cnt_q != '0) begin
          iss_cnt_q <= iss_cnt_q - 1'b1;
        end else if (rd_req_ready_i) begin
          iss_cnt_q  <= iss_beats_q - 1'b1;
          iss_addr_q <= iss_addr_q + 32'(iss_stride_q);
          iss_row_q  <= iss_row_q + 1'b1;
          iss_left_q <= iss_left_q - 1'b1;
          if (iss_left_q == 12'd1) iss_active_q <= 1'b0;
        end
      end
      if (zero_active_q) begin
        zero_row_q  <= zero_row_q + 1'b1;
        zero_left_q <= zero_left_q - 1'b1;
        if (zero_left_q == 12'd1) zero_active_q <= 1'b0;
      end
      if (start_o) begin
        rem_q <= occ - 1'b1;
        if (is_zero) begin
          zero_active_q <= 1'b1;
          zero_left_q   <= rows;
          zero_row_q    <= sp_row;
          zero_scope_q  <= scope;
          zero_signal_q <= signal_m;
          zero_idx_q    <= idx;
        end else begin
          iss_active_q <= 1'b1;
          iss_left_q   <= rows;
          iss_cnt_q    <= '0;
          iss_beats_q  <= beats_row;
          iss_addr_q   <= dram;
          iss_stride_q <= stride;
          iss_row_q    <= sp_row;
          iss_scope_q  <= scope;
          iss_cols_q   <= cols;
          iss_bytes_q  <= row_bytes;
          iss_signal_q <= signal_m;
          iss_idx_q    <= idx;
        end
      end
    end
  end
endmodule

`default_nettype wire
