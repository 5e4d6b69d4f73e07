// The accumulator scratchpad: ROWS rows of TILE int32 elements.  Write ports:
// load unit (DMA and zero), tensor unit, ALU (fixed priority never matters:
// race-free programs never write one row from two units in one cycle).
// Read ports: tensor, ALU destination, ALU source, store.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_spad_acc #(
  parameter int ROWS = 1024,
  parameter int ROW_W = 512,
  localparam int RowBits = $clog2(ROWS)
) (
  input  wire logic               clk_i,
  input  wire logic               load_we_i,
  input  wire logic [RowBits-1:0] load_waddr_i,
  input  wire logic [ROW_W-1:0]   load_wdata_i,
  input  wire logic               tensor_we_i,
  input  wire logic [RowBits-1:0] tensor_waddr_i,
  input  wire logic [ROW_W-1:0]   tensor_wdata_i,
  input  wire logic               alu_we_i,
  input  wire logic [RowBits-1:0] alu_waddr_i,
  input  wire logic [ROW_W-1:0]   alu_wdata_i,
  input  wire logic [RowBits-1:0] tensor_raddr_i,
  output logic      [ROW_W-1:0]   tensor_rdata_o,
  input  wire logic [RowBits-1:0] alu_raddr_dst_i,
  output logic      [ROW_W-1:0]   alu_rdata_dst_o,
  input  wire logic [RowBits-1:0] alu_raddr_src_i,
  output logic      [ROW_W-1:0]   alu_rdata_src_o,
  input  wire logic [RowBits-1:0] store_raddr_i,
  output logic      [ROW_W-1:0]   store_rdata_o
);
  logic [ROW_W-1:0] mem_q [0:ROWS-1];
  initial for (int i = 0; i < ROWS; i++) mem_q[i] = '0;

  always @(posedge clk_i) begin
    if (load_we_i) mem_q[load_waddr_i] <= load_wdata_i;
    if (tensor_we_i) mem_q[tensor_waddr_i] <= tensor_wdata_i;
    if (alu_we_i) mem_q[alu_waddr_i] <= alu_wdata_i;
  end

  assign tensor_rdata_o  = mem_q[tensor_raddr_i];
  assign alu_rdata_dst_o = mem_q[alu_raddr_dst_i];
  assign alu_rdata_src_o = mem_q[alu_raddr_src_i];
  assign store_rdata_o   = mem_q[store_raddr_i];
endmodule

`default_nettype wire
