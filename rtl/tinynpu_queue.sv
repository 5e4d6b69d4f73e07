// In-order instruction queue of one unit: holds instructions dispatched but
// not started.  The count is registered, so an entry popped in cycle s frees
// its slot for a dispatch in cycle s + 1 (the `queues.depth` timing rule).
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_queue #(
  parameter int DEPTH = 8,
  parameter int WIDTH = 144
) (
  input  wire logic             clk_i,
  input  wire logic             rst_ni,
  input  wire logic             push_i,
  input  wire logic [WIDTH-1:0] data_i,
  input  wire logic             pop_i,
  output logic                  valid_o,
  output logic      [WIDTH-1:0] data_o,
  output logic                  full_o
);
  localparam int PW = (DEPTH > 1) ? $clog2(DEPTH) : 1;

  logic [WIDTH-1:0] mem_q [0:DEPTH-1];
  logic [PW-1:0]    rd_q, wr_q;
  logic [PW:0]      count_q;

  function automatic logic [PW-1:0] next_ptr(input logic [PW-1:0] p);
    next_ptr = (p == PW'(DEPTH - 1)) ? '0 : p + 1'b1;
  endfunction

  always @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_q    <= '0;
      wr_q    <= '0;
      count_q <= '0;
    end else begin
      if (push_i) wr_q <= next_ptr(wr_q);
      if (pop_i) rd_q <= next_ptr(rd_q);
      count_q <= count_q + (PW + 1)'(push_i) - (PW + 1)'(pop_i);
    end
  end

  always @(posedge clk_i) begin
    if (push_i) mem_q[wr_q] <= data_i;
  end

  assign valid_o = (count_q != '0);
  assign data_o  = mem_q[rd_q];
  assign full_o  = (count_q == (PW + 1)'(DEPTH));
endmodule

`default_nettype wire
