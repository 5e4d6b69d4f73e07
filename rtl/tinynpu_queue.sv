// In-order instruction queue of one unit: holds instructions dispatched but
// not started.  The count is registered, so an entry popped in cycle s frees
// its slot for a dispatch in cycle s + 1 (the `queues.depth` timing rule).
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_queue #(
  parameter int Depth = 8,
  parameter int Width = 144
) (
  input  wire logic             clk_i,
  input  wire logic             rst_ni,
  input  wire logic             push_i,
  input  wire logic [Width-1:0] data_i,
  input  wire logic             pop_i,
  output logic                  valid_o,
  output logic      [Width-1:0] data_o,
  output logic                  full_o
);
  localparam int PtrW = (Depth > 1) ? $clog2(Depth) : 1;

  logic [Width-1:0] mem_q [Depth];
  logic [PtrW-1:0]  rd_d, rd_q, wr_d, wr_q;
  logic [PtrW:0]    count_d, count_q;

  function automatic logic [PtrW-1:0] next_ptr(input logic [PtrW-1:0] p);
    return (p == PtrW'(Depth - 1)) ? '0 : p + 1'b1;
  endfunction

  always_comb begin
    wr_d    = push_i ? next_ptr(wr_q) : wr_q;
    rd_d    = pop_i ? next_ptr(rd_q) : rd_q;
    count_d = count_q + (PtrW + 1)'(push_i) - (PtrW + 1)'(pop_i);
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      rd_q    <= '0;
      wr_q    <= '0;
      count_q <= '0;
    end else begin
      rd_q    <= rd_d;
      wr_q    <= wr_d;
      count_q <= count_d;
    end
  end

  // Storage without reset (only entries below the count are ever read).
  always_ff @(posedge clk_i) begin
    if (push_i) mem_q[wr_q] <= data_i;
  end

  assign valid_o = (count_q != '0);
  assign data_o  = mem_q[rd_q];
  assign full_o  = (count_q == (PtrW + 1)'(Depth));
endmodule

`default_nettype wire
