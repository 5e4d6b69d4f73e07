// Requantization of one accumulator row on store: with `narrow`, round-shift
// right (ties toward +inf, in 33 bits so it never overflows), relu, saturate
// to int8, packed one byte per lane; without it, relu only, 4 bytes per lane.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_requant #(
  parameter int TILE  = 16,
  parameter int ACC_W = 32
) (
  input  wire logic [TILE*ACC_W-1:0] row_i,
  input  wire logic                  narrow_i,
  input  wire logic                  relu_i,
  input  wire logic [4:0]            shift_i,
  output logic      [TILE*ACC_W-1:0] data_o
);
  logic [TILE*8-1:0]     narrow_row;
  logic [TILE*ACC_W-1:0] raw_row;

  for (genvar l = 0; l < TILE; l++) begin : g_lane
    logic signed [ACC_W:0]   sx, half, rounded, relued;
    logic signed [ACC_W-1:0] x;
    logic        [7:0]       q;
    assign x    = $signed(row_i[l*ACC_W +: ACC_W]);
    assign sx   = {x[ACC_W-1], x};
    assign half = $signed(((ACC_W + 1)'(1) << shift_i) >> 1);
    // Continuous assigns rather than an always block that reads back what it writes.
    assign rounded = (sx + half) >>> shift_i;
    assign relued  = (relu_i && rounded < 0) ? '0 : rounded;
    assign q = (relued > 127) ? 8'd127 : (relued < -128) ? 8'h80 : relued[7:0];
    assign narrow_row[l*8 +: 8] = q;
    assign raw_row[l*ACC_W +: ACC_W] = (relu_i && x < 0) ? '0 : x;
  end

  assign data_o = narrow_i ? {{(TILE*(ACC_W-8)){1'b0}}, narrow_row} : raw_row;
endmodule

`default_nettype wire
