// The store unit: accumulator rows -> DRAM, requantized on the way.
//
// A store that starts in cycle s reads accumulator row r and issues its
// write request in cycle s + 1 + r*beats_row, holding the DRAM port for
// rows*beats_row cycles.  The DRAM acknowledges each row, echoing the tag
// (last-row flag, signal mask, instruction index); the acknowledgement of
// the last row is the completion pulse (cycle e - 1).
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_store_unit import tinynpu_isa_pkg::*; #(
  parameter int IdxW = 16,
  // the write tag: {index, last row, signal}
  localparam int TagW = IdxW + 1 + TNPU_SIGNAL_W
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
  // accumulator read port
  output logic      [TNPU_ACC_ADDR_BITS-1:0]  acc_raddr_o,
  input  wire logic [TNPU_ACC_ROW_WIDTH-1:0]  acc_rdata_i,
  // DRAM write channel
  output logic                                wr_req_valid_o,
  input  wire logic                           wr_req_ready_i,
  output logic      [TNPU_STORE_DRAM_W-1:0]   wr_req_addr_o,
  output logic      [TNPU_ROW_BYTES_BITS-1:0] wr_req_bytes_o,
  output logic      [TNPU_ACC_ROW_WIDTH-1:0]  wr_req_data_o,
  output logic      [TagW-1:0]                wr_req_tag_o,
  input  wire logic                           wr_ack_valid_i,
  input  wire logic [TagW-1:0]                wr_ack_tag_i,
  output logic                                comp_o,
  output logic      [TNPU_SIGNAL_W-1:0]       comp_signal_o,
  output logic      [IdxW-1:0]                comp_idx_o,
  output logic                                stall_err_o
);
  logic                           narrow;
  logic [TNPU_ROW_BYTES_BITS-1:0] row_bytes, beats_row;

  assign narrow      = head_i[TNPU_STORE_NARROW_LSB];
  assign row_bytes   = TNPU_ROW_BYTES_BITS'(head_i[TNPU_STORE_COLS_LSB +: TNPU_STORE_COLS_W])
                       * (narrow ? TNPU_ROW_BYTES_BITS'(1) : TNPU_ROW_BYTES_BITS'(TNPU_ACC_ELEM_BYTES));
  assign beats_row   = (row_bytes + TNPU_ROW_BYTES_BITS'(TNPU_DRAM_BYTES_PER_CYCLE - 1))
                       / TNPU_ROW_BYTES_BITS'(TNPU_DRAM_BYTES_PER_CYCLE);
  assign head_occ_o  = TNPU_OCC_BITS'(head_i[TNPU_STORE_ROWS_LSB +: TNPU_STORE_ROWS_W]) * TNPU_OCC_BITS'(beats_row);

  // Per-instruction info the row sequencer keeps: {index, signal, narrow, relu, shift, bytes}.
  localparam int InfoW = IdxW + TNPU_SIGNAL_W + 2 + TNPU_STORE_SHIFT_W + TNPU_ROW_BYTES_BITS;
  logic [IdxW-1:0]                  req_idx;
  logic [TNPU_SIGNAL_W-1:0]         req_signal;
  logic                             req_narrow, req_relu, req_last;
  logic [TNPU_STORE_SHIFT_W-1:0]    req_shift;
  // Rows are ISA fields; the dispatcher checked them against the accumulator size, so high bits are 0.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [TNPU_STORE_SP_ROW_W-1:0]   req_row;
  /* verilator lint_on UNUSEDSIGNAL */

  tinynpu_dma_rows #(.InfoW(InfoW)) u_rows (
    .clk_i      (clk_i),
    .rst_ni     (rst_ni),
    .start_i    (start_i),
    .rows_i     (head_i[TNPU_STORE_ROWS_LSB +: TNPU_STORE_ROWS_W]),
    .beats_row_i(beats_row),
    .addr_i     (head_i[TNPU_STORE_DRAM_LSB +: TNPU_STORE_DRAM_W]),
    .stride_i   (head_i[TNPU_STORE_STRIDE_LSB +: TNPU_STORE_STRIDE_W]),
    .row_i      (head_i[TNPU_STORE_SP_ROW_LSB +: TNPU_STORE_SP_ROW_W]),
    .info_i     ({head_i[TNPU_WORD_BITS +: IdxW], head_i[TNPU_SIGNAL_LSB +: TNPU_SIGNAL_W], narrow, head_i[TNPU_STORE_RELU_LSB],
                  head_i[TNPU_STORE_SHIFT_LSB +: TNPU_STORE_SHIFT_W], row_bytes}),
    .req_valid_o(wr_req_valid_o),
    .req_ready_i(wr_req_ready_i),
    .req_addr_o (wr_req_addr_o),
    .req_row_o  (req_row),
    .req_last_o (req_last),
    .req_info_o ({req_idx, req_signal, req_narrow, req_relu, req_shift, wr_req_bytes_o})
  );

  tinynpu_requant u_requant (
    .row_i   (acc_rdata_i),
    .narrow_i(req_narrow),
    .relu_i  (req_relu),
    .shift_i (req_shift),
    .data_o  (wr_req_data_o)
  );

  assign acc_raddr_o  = TNPU_ACC_ADDR_BITS'(req_row);
  assign wr_req_tag_o = {req_idx, req_last, req_signal};
  assign stall_err_o  = wr_req_valid_o && !wr_req_ready_i;
  assign {comp_idx_o, comp_o, comp_signal_o} = wr_ack_valid_i ? wr_ack_tag_i : '0;
endmodule

`default_nettype wire
