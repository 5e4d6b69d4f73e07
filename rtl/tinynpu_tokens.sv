// The token channels: one counting semaphore per ordered pair (src -> dst) of
// distinct queued units.  A token signalled by a completion pulse in cycle
// e - 1 is visible from cycle e; a start in cycle s consumes at the end of s.
// The count in cycle t is the tokens signalled with e <= t minus those
// consumed with s <= t (the register minus this cycle's consumption), and it
// overflows when that exceeds tokens.max_count: the register has one spare
// value, so a token arriving in the cycle a start takes one nets out.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_tokens (
  input  wire logic       clk_i,
  input  wire logic       rst_ni,
  // consume_i[dst*4 + src]: unit dst starts an instruction waiting on src.
  input  wire logic [15:0] consume_i,
  // signal_i[src*4 + dst]: unit src completes an instruction signalling dst.
  input  wire logic [15:0] signal_i,
  // avail_o[dst*4 + src]: channel src -> dst holds at least one token.
  output logic      [15:0] avail_o,
  output logic             overflow_o
);
  `include "tinynpu_isa.vh"

  logic [TNPU_TOKEN_BITS:0] count_q [0:15];  // indexed src*4 + dst; the diagonal stays 0
  logic [15:0] overflow;

  for (genvar src = 0; src < 4; src++) begin : g_src
    for (genvar dst = 0; dst < 4; dst++) begin : g_dst
      localparam int Ch = src * 4 + dst;
      logic sig, cons;
      assign sig  = (src != dst) && signal_i[src*4+dst];
      assign cons = (src != dst) && consume_i[dst*4+src];
      assign overflow[Ch] = (count_q[Ch] - (TNPU_TOKEN_BITS + 1)'(cons)) > (TNPU_TOKEN_BITS + 1)'(TNPU_TOKEN_MAX);
      assign avail_o[dst*4+src] = (count_q[Ch] != '0);
      always @(posedge clk_i or negedge rst_ni) begin
        if (!rst_ni) count_q[Ch] <= '0;
        else if (sig != cons) count_q[Ch] <= sig ? count_q[Ch] + 1'b1 : count_q[Ch] - 1'b1;
      end
    end
  end

  assign overflow_o = |overflow;
endmodule

`default_nettype wire
