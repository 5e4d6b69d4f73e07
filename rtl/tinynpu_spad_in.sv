// An input scratchpad (a_reg or b_reg): ROWS rows of TILE elements in TILE
// row banks (bank = row mod TILE), so a whole tile is read in one cycle.
// One write port (the load unit), one tile read port (the tensor unit).
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_spad_in #(
  parameter int ROWS   = 2048,
  parameter int TILE   = 16,
  parameter int ELEM_W = 8,
  localparam int RowW   = TILE * ELEM_W,
  localparam int RowBits = $clog2(ROWS),
  localparam int BankBits = $clog2(TILE),
  localparam int TileBits = RowBits - BankBits
) (
  input  wire logic                   clk_i,
  input  wire logic                   we_i,
  input  wire logic [RowBits-1:0]     waddr_i,
  input  wire logic [RowW-1:0]        wdata_i,
  input  wire logic [TileBits-1:0]    rtile_i,
  output logic      [TILE*RowW-1:0]   rdata_o
);
  for (genvar b = 0; b < TILE; b++) begin : g_bank
    logic [RowW-1:0] mem_q [0:(1 << TileBits) - 1];
    // Scratchpads power up cleared, as in the simulator.
    initial for (int i = 0; i < (1 << TileBits); i++) mem_q[i] = '0;
    always @(posedge clk_i) begin
      if (we_i && waddr_i[BankBits-1:0] == BankBits'(b)) mem_q[waddr_i[RowBits-1:BankBits]] <= wdata_i;
    end
    assign rdata_o[b*RowW +: RowW] = mem_q[rtile_i];
  end
endmodule

`default_nettype wire
