// Requantization of one accumulator row on store: with `narrow`, round-shift
// right (ties toward +inf, one bit wider than the accumulator so it never
// overflows), relu, saturate to int8, packed one byte per lane; without it,
// relu only, the accumulator's bytes per lane.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_requant import tinynpu_isa_pkg::*; (
  input  wire logic [TNPU_ACC_ROW_WIDTH-1:0] row_i,
  input  wire logic                          narrow_i,
  input  wire logic                          relu_i,
  input  wire logic [TNPU_STORE_SHIFT_W-1:0] shift_i,
  output logic      [TNPU_ACC_ROW_WIDTH-1:0] data_o
);
  localparam int AccW    = TNPU_ACC_BITS;
  localparam int NarrowW = 8;  // `narrow` stores int8, whatever the config (the ISA's store semantics)

  logic [TNPU_TILE*NarrowW-1:0]  narrow_row;
  logic [TNPU_ACC_ROW_WIDTH-1:0] raw_row;

  for (genvar l = 0; l < TNPU_TILE; l++) begin : g_lane
    logic signed [AccW:0]     sx, half, rounded, relued;
    logic signed [AccW-1:0]   x;
    logic        [NarrowW-1:0] q;
    assign x    = $signed(row_i[l*AccW +: AccW]);
    assign sx   = {x[AccW-1], x};
    assign half = $signed(((AccW + 1)'(1) << shift_i) >> 1);
    // Continuous assigns rather than an always block that reads back what it writes.
    assign rounded = (sx + half) >>> shift_i;
    assign relued  = (relu_i && rounded < 0) ? '0 : rounded;
    assign q = (relued > 127) ? 8'd127 : (relued < -128) ? 8'h80 : relued[NarrowW-1:0];
    assign narrow_row[l*NarrowW +: NarrowW] = q;
    assign raw_row[l*AccW +: AccW] = (relu_i && x < 0) ? '0 : x;
  end

  assign data_o = narrow_i ? {{(TNPU_TILE*(AccW-NarrowW)){1'b0}}, narrow_row} : raw_row;
endmodule

`default_nettype wire
