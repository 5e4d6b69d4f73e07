// Instruction memory: one 128-bit word per instruction, written by the
// testbench through a simple write port, read asynchronously by fetch.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_imem #(
  parameter int AW = 14
) (
  input  wire logic          clk_i,
  input  wire logic          we_i,
  input  wire logic [AW-1:0] waddr_i,
  input  wire logic [127:0]  wdata_i,
  input  wire logic [AW-1:0] raddr_i,
  output logic      [127:0]  rdata_o
);
  logic [127:0] mem_q [0:(1 << AW) - 1];

  always @(posedge clk_i) begin
    if (we_i) mem_q[waddr_i] <= wdata_i;
  end

  assign rdata_o = mem_q[raddr_i];
endmodule

`default_nettype wire
