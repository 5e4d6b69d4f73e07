// vlut's lookup register: Entries (256) entries of EntryBits (16) bits, written
// one accumulator row per cycle (entry e = row * Lanes + c is the low EntryBits
// of lane c of table row `row`; the last row is partial when Lanes does not
// divide Entries), and Lanes combinational lookups, one per lane of a row:
//   idx = clamp(x - base, 0, Entries - 1)   (one bit wider than x: never wraps)
//   y   = sign-extended table[idx]
// A lookup reads the table as it is in the current cycle (a write lands at the
// edge).  The table has no reset: every vlut writes all of it before its first
// lookup (the ISA's alu_lut timing: ceil(Entries / T) table rows, then the rows).
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_lut import tinynpu_isa_pkg::*; #(
  parameter int Lanes     = TNPU_TILE,  // lookups per cycle and entries per written row (the tile edge T)
  parameter int Entries   = 256,        // vlut's table: an 8-bit index
  parameter int EntryBits = 16,         // the low bits of an acc element that an entry keeps
  parameter int RowW      = $clog2((Entries + Lanes - 1) / Lanes)  // derived: do not override
) (
  input  wire logic                           clk_i,
  input  wire logic                           wr_en_i,
  input  wire logic [RowW-1:0]                wr_row_i,   // table row 0 .. ceil(Entries / Lanes) - 1
  // Only the low EntryBits of each lane are kept (and no lane past the last entry).
  /* verilator lint_off UNUSEDSIGNAL */
  input  wire logic [Lanes*TNPU_ACC_BITS-1:0] wr_data_i,
  /* verilator lint_on UNUSEDSIGNAL */
  input  wire logic [Lanes*TNPU_ACC_BITS-1:0] x_i,        // signed lanes
  input  wire logic [TNPU_ACC_BITS-1:0]       base_i,     // signed
  output logic      [Lanes*TNPU_ACC_BITS-1:0] y_o
);
  localparam int AccW = TNPU_ACC_BITS;
  localparam int IdxW = $clog2(Entries);
  localparam int Leaves = 1 << IdxW;  // the read tree's leaves: Entries, rounded up to a power of two

  logic [EntryBits-1:0] table_q [Entries];

  // Entry e's row and lane are constants, so each entry's write enable is one row compare.
  always_ff @(posedge clk_i) begin
    if (wr_en_i) begin
      for (int e = 0; e < Entries; e++) begin
        if (wr_row_i == RowW'(e / Lanes)) table_q[e] <= wr_data_i[(e % Lanes) * AccW +: EntryBits];
      end
    end
  end

  logic signed [AccW:0] base_wide;
  assign base_wide = {base_i[AccW-1], base_i};

  for (genvar c = 0; c < Lanes; c++) begin : g_lane
    logic signed [AccW:0]   diff;  // x - base exactly: both sign-extended by one bit
    logic [IdxW-1:0]        idx;
    logic [EntryBits-1:0]   entry;
    assign diff  = $signed({x_i[c*AccW + AccW-1], x_i[c*AccW +: AccW]}) - base_wide;
    assign idx   = (diff < 0) ? '0
                 : (diff > (AccW+1)'(Entries - 1)) ? IdxW'(Entries - 1)
                 : diff[IdxW-1:0];
    // The read port as a binary tree of 2:1 multiplexers (the index's top bit at the root): 20% less
    // area than the decoder and OR tree Yosys makes of table_q[idx] (0.090 against 0.112 mm^2 at T = 8).
    // node[n] selects between node[2n] and node[2n+1]; the leaves node[Leaves + e] are the entries.
    logic [EntryBits-1:0] node [1:2*Leaves-1];
    for (genvar e = 0; e < Leaves; e++) begin : g_leaf
      assign node[Leaves + e] = (e < Entries) ? table_q[e] : '0;
    end
    for (genvar n = 1; n < Leaves; n++) begin : g_node
      assign node[n] = idx[IdxW - $clog2(n + 1)] ? node[2*n + 1] : node[2*n];
    end
    assign entry = node[1];
    assign y_o[c*AccW +: AccW] = {{(AccW-EntryBits){entry[EntryBits-1]}}, entry};
  end
endmodule

`default_nettype wire
