// The accumulator scratchpad: TNPU_ACC_ROWS rows of T accumulator elements.
// Write ports: load unit (DMA and zero), tensor unit, ALU (fixed priority
// never matters: race-free programs never write one row from two units in
// one cycle); the tensor and ALU write the row they read.  Read ports:
// tensor, ALU destination, ALU source, store.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_spad_acc import tinynpu_isa_pkg::*; #(
  localparam int AddrW = TNPU_ACC_ADDR_BITS,
  localparam int RowW  = TNPU_ACC_ROW_WIDTH
) (
  input  wire logic             clk_i,
  input  wire logic             load_we_i,
  input  wire logic [AddrW-1:0] load_waddr_i,
  input  wire logic [RowW-1:0]  load_wdata_i,
  input  wire logic [AddrW-1:0] tensor_addr_i,
  output logic      [RowW-1:0]  tensor_rdata_o,
  input  wire logic             tensor_we_i,
  input  wire logic [RowW-1:0]  tensor_wdata_i,
  input  wire logic [AddrW-1:0] alu_dst_addr_i,
  output logic      [RowW-1:0]  alu_dst_rdata_o,
  input  wire logic             alu_dst_we_i,
  input  wire logic [RowW-1:0]  alu_dst_wdata_i,
  input  wire logic [AddrW-1:0] alu_src_addr_i,
  output logic      [RowW-1:0]  alu_src_rdata_o,
  input  wire logic [AddrW-1:0] store_raddr_i,
  output logic      [RowW-1:0]  store_rdata_o
);
  logic [RowW-1:0] mem_q [TNPU_ACC_ROWS];
  // Scratchpads power up cleared, as in the simulator.
  initial for (int i = 0; i < TNPU_ACC_ROWS; i++) mem_q[i] = '0;

  always_ff @(posedge clk_i) begin
    if (load_we_i) mem_q[load_waddr_i] <= load_wdata_i;
    if (tensor_we_i) mem_q[tensor_addr_i] <= tensor_wdata_i;
    if (alu_dst_we_i) mem_q[alu_dst_addr_i] <= alu_dst_wdata_i;
  end

  assign tensor_rdata_o  = mem_q[tensor_addr_i];
  assign alu_dst_rdata_o = mem_q[alu_dst_addr_i];
  assign alu_src_rdata_o = mem_q[alu_src_addr_i];
  assign store_rdata_o   = mem_q[store_raddr_i];
endmodule

`default_nettype wire
