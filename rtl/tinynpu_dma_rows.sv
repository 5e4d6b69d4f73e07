// The row sequencer both DMA engines share: an instruction that starts in
// cycle s presents row r's DRAM request in cycle s + 1 + r * beats_row (one
// request per row, the port held for rows * beats_row cycles), with the
// row's DRAM address (addr + r * stride), scratchpad row (row + r), a
// last-row flag and the engine's per-instruction info captured at the start.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_dma_rows import tinynpu_isa_pkg::*; #(
  parameter int InfoW = 1  // bits of the engine's per-instruction info
) (
  input  wire logic                           clk_i,
  input  wire logic                           rst_ni,
  input  wire logic                           start_i,
  input  wire logic [TNPU_LOAD_ROWS_W-1:0]    rows_i,
  input  wire logic [TNPU_ROW_BYTES_BITS-1:0] beats_row_i,
  input  wire logic [TNPU_LOAD_DRAM_W-1:0]    addr_i,
  input  wire logic [TNPU_LOAD_STRIDE_W-1:0]  stride_i,
  input  wire logic [TNPU_LOAD_SP_ROW_W-1:0]  row_i,
  input  wire logic [InfoW-1:0]               info_i,
  // the current row's request (ready must stay high: see tinynpu_top)
  output logic                                req_valid_o,
  input  wire logic                           req_ready_i,
  output logic      [TNPU_LOAD_DRAM_W-1:0]    req_addr_o,
  output logic      [TNPU_LOAD_SP_ROW_W-1:0]  req_row_o,
  output logic                                req_last_o,
  output logic      [InfoW-1:0]               req_info_o
);
  logic                           active_d, active_q;
  logic [TNPU_LOAD_ROWS_W-1:0]    left_d, left_q;    // rows still to request
  logic [TNPU_ROW_BYTES_BITS-1:0] wait_d, wait_q;    // cycles until the next request
  logic [TNPU_ROW_BYTES_BITS-1:0] beats_d, beats_q;
  logic [TNPU_LOAD_DRAM_W-1:0]    addr_d, addr_q;
  logic [TNPU_LOAD_STRIDE_W-1:0]  stride_d, stride_q;
  logic [TNPU_LOAD_SP_ROW_W-1:0]  row_d, row_q;
  logic [InfoW-1:0]               info_d, info_q;

  assign req_valid_o = active_q && (wait_q == '0);
  assign req_addr_o  = addr_q;
  assign req_row_o   = row_q;
  assign req_last_o  = (left_q == TNPU_LOAD_ROWS_W'(1));
  assign req_info_o  = info_q;

  always_comb begin
    active_d = active_q;
    left_d   = left_q;
    wait_d   = wait_q;
    beats_d  = beats_q;
    addr_d   = addr_q;
    stride_d = stride_q;
    row_d    = row_q;
    info_d   = info_q;
    if (active_q) begin
      if (wait_q != '0) begin
        wait_d = wait_q - 1'b1;
      end else if (req_ready_i) begin
        wait_d = beats_q - 1'b1;
        addr_d = addr_q + TNPU_LOAD_DRAM_W'(stride_q);
        row_d  = row_q + 1'b1;
        left_d = left_q - 1'b1;
        if (req_last_o) active_d = 1'b0;
      end
    end
    if (start_i) begin
      active_d = 1'b1;
      left_d   = rows_i;
      wait_d   = '0;
      beats_d  = beats_row_i;
      addr_d   = addr_i;
      stride_d = stride_i;
      row_d    = row_i;
      info_d   = info_i;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q <= 1'b0;
      left_q   <= '0;
      wait_q   <= '0;
      beats_q  <= '0;
      addr_q   <= '0;
      stride_q <= '0;
      row_q    <= '0;
      info_q   <= '0;
    end else begin
      active_q <= active_d;
      left_q   <= left_d;
      wait_q   <= wait_d;
      beats_q  <= beats_d;
      addr_q   <= addr_d;
      stride_q <= stride_d;
      row_q    <= row_d;
      info_q   <= info_d;
    end
  end
endmodule

`default_nettype wire
