// Instruction memory: one word per instruction, written by the testbench
// through a simple write port, read asynchronously by fetch.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_imem import tinynpu_isa_pkg::*; #(
  parameter int AddrW = 14
) (
  input  wire logic                      clk_i,
  input  wire logic                      we_i,
  input  wire logic [AddrW-1:0]          waddr_i,
  input  wire logic [TNPU_WORD_BITS-1:0] wdata_i,
  input  wire logic [AddrW-1:0]          raddr_i,
  output logic      [TNPU_WORD_BITS-1:0] rdata_o
);
  logic [TNPU_WORD_BITS-1:0] mem_q [1 << AddrW];

  always_ff @(posedge clk_i) begin
    if (we_i) mem_q[waddr_i] <= wdata_i;
  end

  assign rdata_o = mem_q[raddr_i];
endmodule

`default_nettype wire
