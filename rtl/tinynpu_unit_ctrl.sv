// Start control of one queued unit, the same for load, tensor, ALU and store:
// the unit starts its queue head in cycle s when the entry is visible, its
// occupancy counter is zero (s >= s(prev) + occ(prev)), every channel it
// waits on holds a token, nothing unit-specific holds it back (hold_i: a
// zero behind loads in flight), and, for a head that needs the DRAM port,
// the arbiter grants it.  The start pops the head and consumes one token
// from every channel it waits on at the edge that ends s.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_unit_ctrl import tinynpu_isa_pkg::*; (
  input  wire logic                             clk_i,
  input  wire logic                             rst_ni,
  // the queue head: its wait mask and what the unit makes of it
  input  wire logic                             head_valid_i,
  input  wire logic [TNPU_NUM_QUEUED_UNITS-1:0] head_wait_i,
  input  wire logic [TNPU_OCC_BITS-1:0]         head_occ_i,
  input  wire logic                             head_hold_i,
  input  wire logic                             head_port_i,
  // tokens: tok_avail_i[src] = channel src -> this unit holds a token
  input  wire logic [TNPU_NUM_QUEUED_UNITS-1:0] tok_avail_i,
  output logic      [TNPU_NUM_QUEUED_UNITS-1:0] consume_o,
  // the shared DRAM port
  output logic                                  port_req_o,
  input  wire logic                             port_grant_i,
  output logic                                  start_o,
  // the last cycle the running instruction occupies the unit
  output logic                                  occ_last_o
);
  logic [TNPU_OCC_BITS-1:0]         rem_d, rem_q;  // occupancy cycles left after this one
  logic                             ready;

  assign ready      = head_valid_i && ((head_wait_i & ~tok_avail_i) == '0) && (rem_q == '0) && !head_hold_i;
  assign port_req_o = ready && head_port_i;
  assign start_o    = ready && (!head_port_i || port_grant_i);
  assign consume_o  = start_o ? head_wait_i : '0;
  assign occ_last_o = (rem_q == TNPU_OCC_BITS'(1));

  always_comb begin
    rem_d = rem_q;
    if (start_o) rem_d = head_occ_i - 1'b1;
    else if (rem_q != '0) rem_d = rem_q - 1'b1;
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) rem_q <= '0;
    else rem_q <= rem_d;
  end
endmodule

`default_nettype wire
