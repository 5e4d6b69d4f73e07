// The 16x16 MAC array, one output row per cycle: out[c] = sum_x a[x] * b[c][x]
// (B transposed, as tmm16 defines), products summed in ACC_W bits with
// two's-complement wraparound.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_mac_array #(
  parameter int TILE   = 16,
  parameter int IN_W   = 8,
  parameter int ACC_W  = 32
) (
  input  wire logic [TILE*IN_W-1:0]      a_row_i,
  input  wire logic [TILE*TILE*IN_W-1:0] b_tile_i,
  output logic      [TILE*ACC_W-1:0]     dot_o
);
  for (genvar c = 0; c < TILE; c++) begin : g_col
    logic signed [ACC_W-1:0] sum;
    always @* begin
      sum = '0;
      for (int x = 0; x < TILE; x++) begin
        sum = sum + ACC_W'($signed(a_row_i[x*IN_W +: IN_W]) * $signed(b_tile_i[(c*TILE + x)*IN_W +: IN_W]));
      end
    end
    assign dot_o[c*ACC_W +: ACC_W] = sum;
  end
endmodule

`default_nettype wire
