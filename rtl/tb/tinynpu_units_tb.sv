// Module-level bench wrapper: the combinational MAC array and requantizer,
// driven and checked against numpy by rtl/tb/tinynpu_units_cocotb.py.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_units_tb;
  `include "tinynpu_isa.vh"
  localparam int InRowW = TNPU_TILE * TNPU_INPUT_BITS;
  localparam int AccRowW = TNPU_TILE * TNPU_ACC_BITS;

  logic [InRowW-1:0]           a_row;
  logic [TNPU_TILE*InRowW-1:0] b_tile;
  logic [AccRowW-1:0]          dot;
  tinynpu_mac_array #(.TILE(TNPU_TILE), .IN_W(TNPU_INPUT_BITS), .ACC_W(TNPU_ACC_BITS)) u_mac (
    .a_row_i (a_row),
    .b_tile_i(b_tile),
    .dot_o   (dot)
  );

  logic [AccRowW-1:0] acc_row, rq_out;
  logic               narrow, relu;
  logic [4:0]         shift;
  tinynpu_requant #(.TILE(TNPU_TILE), .ACC_W(TNPU_ACC_BITS)) u_requant (
    .row_i   (acc_row),
    .narrow_i(narrow),
    .relu_i  (relu),
    .shift_i (shift),
    .data_o  (rq_out)
  );
endmodule

`default_nettype wire
