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
  // One behavioural loop, evaluated once per input change.  The sensitivity
  // list is explicit: with @* Icarus also waits on the block's own running
  // sum and re-evaluates it, and an unrolled tree of 256 multiplier nets runs
  // three times slower there than this loop (measured).
  always @(a_row_i or b_tile_i) begin : g_dot
    logic signed [ACC_W-1:0] sum;
    for (int c = 0; c < TILE; c++) begin
      sum = '0;
      for (int x = 0; x < TILE; x++) begin
        sum = sum + ACC_W'($signed(a_row_i[x*IN_W +: IN_W]) * $signed(b_tile_i[(c*TILE + x)*IN_W +: IN_W]));
      end
      dot_o[c*ACC_W +: ACC_W] = sum;
    end
  end
endmodule

`default_nettype wire
