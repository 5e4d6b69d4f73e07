// The token channels: one counting semaphore per ordered pair (src -> dst) of
// distinct queued units.  A token signalled by a completion pulse in cycle
// e - 1 is visible from cycle e; a start in cycle s consumes at the end of s.
// The count in cycle t is the tokens signalled with e <= t minus those
// consumed with s <= t (the register minus this cycle's consumption), and it
// overflows when that exceeds tokens.max_count: the register has one spare
// value, so a token arriving in the cycle a start takes one nets out.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_tokens import tinynpu_isa_pkg::*; #(
  localparam int N = TNPU_NUM_QUEUED_UNITS
) (
  input  wire logic         clk_i,
  input  wire logic         rst_ni,
  // consume_i[dst*N + src]: unit dst starts an instruction waiting on src.
  input  wire logic [N*N-1:0] consume_i,
  // signal_i[src*N + dst]: unit src completes an instruction signalling dst.
  input  wire logic [N*N-1:0] signal_i,
  // avail_o[dst*N + src]: channel src -> dst holds at least one token.
  output logic      [N*N-1:0] avail_o,
  output logic                overflow_o
);
  localparam int CountW = TNPU_TOKEN_BITS + 1;  // one spare value: see above

  logic [N*N-1:0] overflow;
  for (genvar src = 0; src < N; src++) begin : g_src
    for (genvar dst = 0; dst < N; dst++) begin : g_dst
      if (src == dst) begin : g_self  // a unit never waits on or signals itself (checked at dispatch)
        assign overflow[src*N+dst] = 1'b0;
        assign avail_o[dst*N+src]  = 1'b0;
      end else begin : g_channel
        logic              sig, cons;
        logic [CountW-1:0] count_d, count_q;
        assign sig  = signal_i[src*N+dst];
        assign cons = consume_i[dst*N+src];
        assign overflow[src*N+dst] = (count_q - CountW'(cons)) > CountW'(TNPU_TOKEN_MAX);
        assign avail_o[dst*N+src]  = (count_q != '0);
        assign count_d = count_q + CountW'(sig) - CountW'(cons);
        always_ff @(posedge clk_i or negedge rst_ni) begin
          if (!rst_ni) count_q <= '0;
          else count_q <= count_d;
        end
      end
    end
  end

  assign overflow_o = |overflow;
endmodule

`default_nettype wire
