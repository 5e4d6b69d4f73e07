// The shared DRAM port.  A DMA instruction holds the port for its `beats`
// cycles from its start (port_free = s + beats).  When both engines request
// in a cycle the port is free, the one that became ready first wins; if they
// became ready in the same cycle, the load wins.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_port_arbiter import tinynpu_isa_pkg::*; (
  input  wire logic                     clk_i,
  input  wire logic                     rst_ni,
  input  wire logic                     load_req_i,
  input  wire logic [TNPU_OCC_BITS-1:0] load_beats_i,
  input  wire logic                     store_req_i,
  input  wire logic [TNPU_OCC_BITS-1:0] store_beats_i,
  output logic                          load_grant_o,
  output logic                          store_grant_o
);
  logic [TNPU_OCC_BITS-1:0] busy_d, busy_q;  // cycles the port stays held after this one
  logic                     store_older_d, store_older_q;  // the waiting store became ready first

  logic port_free;
  assign port_free     = (busy_q == '0);
  assign load_grant_o  = port_free && load_req_i && !(store_req_i && store_older_q);
  assign store_grant_o = port_free && store_req_i && !load_grant_o;

  always_comb begin
    busy_d = busy_q;
    if (load_grant_o) busy_d = load_beats_i - 1'b1;
    else if (store_grant_o) busy_d = store_beats_i - 1'b1;
    else if (!port_free) busy_d = busy_q - 1'b1;
    // Age of the waiting requests, per instruction: a store left waiting is
    // older than the next load request when no load was waiting with it,
    // or when the waiting load was just granted (the next load request is
    // another instruction, ready one cycle later at the earliest); while
    // both wait, the order stays as it was.
    store_older_d = store_req_i && !store_grant_o && (!load_req_i || load_grant_o || store_older_q);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      busy_q        <= '0;
      store_older_q <= 1'b0;
    end else begin
      busy_q        <= busy_d;
      store_older_q <= store_older_d;
    end
  end
endmodule

`default_nettype wire
