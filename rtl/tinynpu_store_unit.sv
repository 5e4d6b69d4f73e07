// The store unit: accumulator rows -> DRAM, requantized on the way.
//
// A store that starts in cycle s reads accumulator row r and issues its
// write request in cycle s + 1 + r*beats_row, holding the DRAM port for
// rows*beats_row cycles.  The DRAM acknowledges each row, echoing the tag
// (last-row flag, signal mask, instruction index); the acknowledgement of
// the last row is the completion pulse (cycle e - 1).
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_store_unit #(
  parameter int IDX_W  = 16,
  parameter int WTAG_W = 21,
  parameter int ROW_W  = 512
) (
  input  wire logic               clk_i,
  input  wire logic               rst_ni,
  input  wire logic               q_valid_i,
  input  wire logic [IDX_W+127:0] q_data_i,
  output logic                    q_pop_o,
  input  wire logic [3:0]         tok_avail_i,
  output logic      [3:0]         consume_o,
  output logic                    port_req_o,
  output logic      [15:0]        port_beats_o,
  input  wire logic               port_grant_i,
  // accumulator read port
  output logic      [13:0]        acc_raddr_o,
  input  wire logic [ROW_W-1:0]   acc_rdata_i,
  // DRAM write channel
  output logic                    wr_req_valid_o,
  input  wire logic               wr_req_ready_i,
  output logic      [31:0]        wr_req_addr_o,
  output logic      [6:0]         wr_req_bytes_o,
  output logic      [ROW_W-1:0]   wr_req_data_o,
  output logic      [WTAG_W-1:0]  wr_req_tag_o,
  input  wire logic               wr_ack_valid_i,
  input  wire logic [WTAG_W-1:0]  wr_ack_tag_i,
  output logic                    comp_o,
  output logic      [3:0]         comp_signal_o,
  output logic      [IDX_W-1:0]   comp_idx_o,
  output logic                    start_o,
  output logic      [IDX_W-1:0]   start_idx_o,
  output logic                    stall_err_o
);
  `include "tinynpu_isa.vh"

  logic [127:0]     word;
  logic [IDX_W-1:0] idx;
  logic [3:0]       wait_m, signal_m;
  logic [TNPU_STORE_SP_ROW_W-1:0] sp_row;
  logic [TNPU_STORE_DRAM_W-1:0] dram;
  logic [TNPU_STORE_STRIDE_W-1:0] stride;
  logic [TNPU_STORE_ROWS_W-1:0] rows;
  logic [4:0]       cols, shift;
  logic             narrow, relu;
  logic [6:0]       row_bytes;
  logic [2:0]       beats_row;

  assign word      = q_data_i[127:0];
  assign idx       = q_data_i[IDX_W+127:128];
  assign wait_m    = word[TNPU_STORE_WAIT_LSB +: TNPU_STORE_WAIT_W];
  assign signal_m  = word[TNPU_STORE_SIGNAL_LSB +: TNPU_STORE_SIGNAL_W];
  assign sp_row    = word[TNPU_STORE_SP_ROW_LSB +: TNPU_STORE_SP_ROW_W];
  assign dram      = word[TNPU_STORE_DRAM_LSB +: TNPU_STORE_DRAM_W];
  assign stride    = word[TNPU_STORE_STRIDE_LSB +: TNPU_STORE_STRIDE_W];
  assign rows      = word[TNPU_STORE_ROWS_LSB +: TNPU_STORE_ROWS_W];
  assign cols      = word[TNPU_STORE_COLS_LSB +: TNPU_STORE_COLS_W];
  assign narrow    = word[TNPU_STORE_NARROW_LSB];
  assign relu      = word[TNPU_STORE_RELU_LSB];
  assign shift     = word[TNPU_STORE_SHIFT_LSB +: TNPU_STORE_SHIFT_W];
  assign row_bytes = 7'(cols) * (narrow ? 7'd1 : 7'(TNPU_ACC_ELEM_BYTES));
  assign beats_row = 3'((row_bytes + 7'(TNPU_DRAM_BYTES_PER_CYCLE - 1)) / 7'(TNPU_DRAM_BYTES_PER_CYCLE));

  logic [15:0] rem_q;
  logic        ready;
  assign ready        = q_valid_i && ((wait_m & ~tok_avail_i) == 4'b0) && (rem_q == '0);
  assign port_req_o   = ready;
  assign port_beats_o = 16'(rows) * 16'(beats_row);
  assign start_o      = ready && port_grant_i;
  assign start_idx_o  = idx;
  assign q_pop_o      = start_o;
  assign consume_o    = start_o ? wait_m : 4'b0;

  logic             iss_active_q;
  logic [TNPU_STORE_ROWS_W-1:0] iss_left_q;
  logic [2:0]       iss_cnt_q, iss_beats_q;
  logic [TNPU_STORE_DRAM_W-1:0] iss_addr_q;
  logic [TNPU_STORE_STRIDE_W-1:0] iss_stride_q;
  logic [TNPU_STORE_SP_ROW_W-1:0] iss_row_q;
  logic [6:0]       iss_bytes_q;
  logic             iss_narrow_q, iss_relu_q;
  logic [4:0]       iss_shift_q;
  logic [3:0]       iss_signal_q;
  logic [IDX_W-1:0] iss_idx_q;

  tinynpu_requant #(
    .TILE (TNPU_TILE),
    .ACC_W(TNPU_ACC_BITS)
  ) u_requant (
    .row_i   (acc_rdata_i),
    .narrow_i(iss_narrow_q),
    .relu_i  (iss_relu_q),
    .shift_i (iss_shift_q),
    .data_o  (wr_req_data_o)
  );

  assign acc_raddr_o    = iss_row_q;
  assign wr_req_valid_o = iss_active_q && (iss_cnt_q == '0);
  assign wr_req_addr_o  = iss_addr_q;
  assign wr_req_bytes_o = iss_bytes_q;
  assign wr_req_tag_o   = {iss_idx_q, (iss_left_q == 12'd1), iss_signal_q};
  assign stall_err_o    = wr_req_valid_o && !wr_req_ready_i;

  logic [IDX_W-1:0] a_idx;
  logic             a_last;
  logic [3:0]       a_signal;
  assign {a_idx, a_last, a_signal} = wr_ack_tag_i;
  assign comp_o        = wr_ack_valid_i && a_last;
  assign comp_signal_o = a_signal;
  assign comp_idx_o    = a_idx;

  always @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rem_q        <= '0;
      iss_active_q <= 1'b0;
      iss_left_q   <= '0;
      iss_cnt_q    <= '0;
      iss_beats_q  <= '0;
      iss_addr_q   <= '0;
      iss_stride_q <= '0;
      iss_row_q    <= '0;
      iss_bytes_q  <= '0;
      iss_narrow_q <= 1'b0;
      iss_relu_q   <= 1'b0;
      iss_shift_q  <= '0;
      iss_signal_q <= '0;
      iss_idx_q    <= '0;
    end else begin
      if (rem_q != '0) rem_q <= rem_q - 1'b1;
      if (iss_active_q) begin
        if (iss_cnt_q != '0) begin
          iss_cnt_q <= iss_cnt_q - 1'b1;
        end else if (wr_req_ready_i) begin
          iss_cnt_q  <= iss_beats_q - 1'b1;
          iss_addr_q <= iss_addr_q + 32'(iss_stride_q);
          iss_row_q  <= iss_row_q + 1'b1;
          iss_left_q <= iss_left_q - 1'b1;
          if (iss_left_q == 12'd1) iss_active_q <= 1'b0;
        end
      end
      if (start_o) begin
        rem_q        <= port_beats_o - 1'b1;
        iss_active_q <= 1'b1;
        iss_left_q   <= rows;
        iss_cnt_q    <= '0;
        iss_beats_q  <= beats_row;
        iss_addr_q   <= dram;
        iss_stride_q <= stride;
        iss_row_q    <= sp_row;
        iss_bytes_q  <= row_bytes;
        iss_narrow_q <= narrow;
        iss_relu_q   <= relu;
        iss_shift_q  <= shift;
        iss_signal_q <= signal_m;
        iss_idx_q    <= idx;
      end
    end
  end
endmodule

`default_nettype wire
