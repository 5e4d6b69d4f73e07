// An input scratchpad (a_reg or b_reg): Rows rows of T elements in T row
// banks (bank = row mod T), so a whole tile is read in one cycle.  One write
// port (the load unit), one tile read port (the tensor unit).
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_spad_in import tinynpu_isa_pkg::*; #(
  parameter int Rows = 2048,
  localparam int RowBits  = $clog2(Rows),
  localparam int TileBits = RowBits - TNPU_TILE_BITS
) (
  input  wire logic                                   clk_i,
  input  wire logic                                   we_i,
  input  wire logic [RowBits-1:0]                     waddr_i,
  input  wire logic [TNPU_IN_ROW_WIDTH-1:0]           wdata_i,
  input  wire logic [TileBits-1:0]                    rtile_i,
  output logic      [TNPU_TILE*TNPU_IN_ROW_WIDTH-1:0] rdata_o
);
  for (genvar b = 0; b < TNPU_TILE; b++) begin : g_bank
    logic [TNPU_IN_ROW_WIDTH-1:0] mem_q [1 << TileBits];
    // Scratchpads power up cleared, as in the simulator.
    initial for (int i = 0; i < (1 << TileBits); i++) mem_q[i] = '0;
    always_ff @(posedge clk_i) begin
      if (we_i && waddr_i[TNPU_TILE_BITS-1:0] == TNPU_TILE_BITS'(b)) mem_q[waddr_i[RowBits-1:TNPU_TILE_BITS]] <= wdata_i;
    end
    assign rdata_o[b*TNPU_IN_ROW_WIDTH +: TNPU_IN_ROW_WIDTH] = mem_q[rtile_i];
  end
endmodule

`default_nettype wire
