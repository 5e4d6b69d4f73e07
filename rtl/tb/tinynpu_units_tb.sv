// Module-level bench wrapper: the combinational MAC array, requantizer and one
// vrequantf lane (with a multiplier standing in for the ALU lane's), driven and
// checked against numpy by rtl/tb/tinynpu_units_cocotb.py.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

// Lint waivers: cocotb drives the inputs and reads the outputs through VPI, so within the
// design they are UNDRIVEN and UNUSEDSIGNAL.
/* verilator lint_off UNDRIVEN */
/* verilator lint_off UNUSEDSIGNAL */
module tinynpu_units_tb import tinynpu_isa_pkg::*;;
  logic [TNPU_IN_ROW_WIDTH-1:0]           a_row;
  logic [TNPU_TILE*TNPU_IN_ROW_WIDTH-1:0] b_tile;
  logic [TNPU_ACC_ROW_WIDTH-1:0]          dot;
  tinynpu_mac_array u_mac (
    .a_row_i (a_row),
    .b_tile_i(b_tile),
    .dot_o   (dot)
  );

  logic [TNPU_ACC_ROW_WIDTH-1:0] acc_row, rq_out;
  logic                          narrow, relu;
  logic [TNPU_STORE_SHIFT_W-1:0] shift;
  tinynpu_requant u_requant (
    .row_i   (acc_row),
    .narrow_i(narrow),
    .relu_i  (relu),
    .shift_i (shift),
    .data_o  (rq_out)
  );

  logic [31:0] rqf_x, rqf_scale, rqf_y;
  logic [23:0] rqf_mant_a, rqf_mant_b;
  logic [47:0] rqf_prod;
  assign rqf_prod = 48'(rqf_mant_a) * 48'(rqf_mant_b);
  tinynpu_requantf u_requantf (
    .x_i     (rqf_x),
    .scale_i (rqf_scale),
    .mant_a_o(rqf_mant_a),
    .mant_b_o(rqf_mant_b),
    .prod_i  (rqf_prod),
    .y_o     (rqf_y)
  );
endmodule
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on UNDRIVEN */

`default_nettype wire
