// vrecip / vrsqrt on one value: a sequential unit that takes a FIXED number of
// cycles per value, whatever the value (the ISA's timing is rows * C + latency).
//   recip (rsqrt_i = 0): r = 2^31-1 if x <= 0 else min(2^S // x, 2^31-1)        exact for S 0..63
//   rsqrt (rsqrt_i = 1): r = 2^31-1 if x <= 0 else min(isqrt(4^S // x), 2^31-1) exact for S 0..31
//                        (the largest r with r*r*x <= 4^S; S >= 32 is taken mod 32)
// (for TNPU_ACC_BITS = 32; every width below follows from it.)
//
// Protocol: start_i high in cycle s samples rsqrt_i, x_i and shift_i; done_o is
// high in exactly cycle s + C (C = RecipCycles or RsqrtCycles), with r_o valid,
// and r_o holds until the next start is sampled.  A start in cycle s + C (the
// done cycle) runs back to back, so n values take n * C cycles.
//
// Algorithm, one bit per cycle on one subtractor each, so the area is small:
// * Both: restoring division of the single-bit dividend N = 2^P by x, P = S
//   (recip) or 2S (rsqrt).  The start edge loads the partial remainder
//   N >> (Top + 1) and the saturation flag (x <= 0, or that remainder >= x,
//   i.e. the quotient does not fit in Top + 1 bits); then one edge per quotient
//   bit Top .. 0.  recip: Top = 30, 31 edges; the quotient is the result.
// * rsqrt: Top = 61, so the divider produces the 62 bits of D = 4^S // x
//   (62 edges); a digit-by-digit square root takes them two at a time, one
//   root bit per pair, one edge after the pair is complete (31 root bits, the
//   last at edge 63).  isqrt(D) >= 2^31 needs D >= 2^62: exactly the
//   divider's saturation (x = 1, S = 31).
// Hence the minimum C: 1 + 31 = 32 for recip (RecipCycles >= TNPU_ACC_BITS),
// 1 + 62 + 1 = 64 for rsqrt (RsqrtCycles >= 2 * TNPU_ACC_BITS); larger values
// (from the ISA's YAML) pad idle cycles before done_o, smaller ones are refused.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_recip_rsqrt import tinynpu_isa_pkg::*; #(
  parameter int RecipCycles = TNPU_ACC_BITS,          // C of vrecip, >= TNPU_ACC_BITS
  parameter int RsqrtCycles = 2 * TNPU_ACC_BITS,      // C of vrsqrt, >= 2 * TNPU_ACC_BITS
  parameter int ShiftW      = $clog2(2 * TNPU_ACC_BITS)  // S: recip's 0 .. 2*AccW-2 need this many bits
) (
  input  wire logic                     clk_i,
  input  wire logic                     rst_ni,
  input  wire logic                     start_i,
  input  wire logic                     rsqrt_i,
  input  wire logic [TNPU_ACC_BITS-1:0] x_i,      // signed
  input  wire logic [ShiftW-1:0]        shift_i,  // S
  output logic                          done_o,
  output logic      [TNPU_ACC_BITS-1:0] r_o
);
  localparam int AccW      = TNPU_ACC_BITS;
  localparam int QW        = AccW - 1;       // result bits below saturation (and x's when not saturated)
  localparam int RecipTop  = AccW - 2;       // recip's quotient bits Top .. 0
  localparam int RsqrtTop  = 2 * AccW - 3;   // the bits of D = 4^S // x
  localparam int MaxCycles = (RecipCycles > RsqrtCycles) ? RecipCycles : RsqrtCycles;
  localparam int CntW      = ($clog2(MaxCycles) > ShiftW ? $clog2(MaxCycles) : ShiftW) + 1;
  localparam logic [AccW-1:0] SatValue = {1'b0, {QW{1'b1}}};

  // The ISA's YAML gives C; the algorithm cannot take fewer cycles, so such a build must not exist.
  // (Icarus 11 has no elaboration-time $error: it checks at time 0 instead.)
`ifdef __ICARUS__
  initial if (RecipCycles < AccW || RsqrtCycles < 2 * AccW)
    $fatal(1, "tinynpu_recip_rsqrt: RecipCycles must be >= TNPU_ACC_BITS and RsqrtCycles >= 2 * TNPU_ACC_BITS");
`else
  if (RecipCycles < AccW || RsqrtCycles < 2 * AccW) begin : g_too_few_cycles
    $error("tinynpu_recip_rsqrt: RecipCycles must be >= TNPU_ACC_BITS and RsqrtCycles >= 2 * TNPU_ACC_BITS");
  end
`endif

  // ---- the start: dividend position, initial remainder, saturation -------------------------------
  logic [CntW-1:0] pos, top, over_by;
  logic [AccW:0]   lim;        // 2^(P - Top - 1): N >> (Top + 1) when P > Top
  logic            over, sat;
  assign pos     = rsqrt_i ? CntW'({shift_i[ShiftW-2:0], 1'b0}) : CntW'(shift_i);
  assign top     = rsqrt_i ? CntW'(RsqrtTop) : CntW'(RecipTop);
  assign over    = pos > top;
  assign over_by = pos - top - CntW'(1);
  assign lim     = (AccW+1)'(1) << over_by;
  assign sat     = x_i[AccW-1] || x_i == '0 || (over && {1'b0, x_i} <= lim);

  // ---- state -------------------------------------------------------------------------------------
  logic            run_q, rsqrt_q, sat_q;
  logic [CntW-1:0] step_q, pos_q;   // step k = 0, 1, ... in cycles s+1, s+2, ...
  logic [QW-1:0]   x_q, rem_q;      // divisor and division remainder (< x)
  logic [QW-1:0]   q_q;             // recip's quotient or rsqrt's root, shifted in from the right
  logic [AccW-1:0] srem_q;          // square-root remainder (<= 2 * root)
  logic [1:0]      pair_q;          // the last two quotient bits (D's next square-root digit)

  // ---- one division step: quotient bit Top - k of 2^P // x ----------------------------------------
  logic            div_on, dbit, qbit;
  logic [CntW-1:0] bit_idx;
  logic [AccW-1:0] t;
  logic [AccW:0]   diff;
  assign div_on  = step_q <= (rsqrt_q ? CntW'(RsqrtTop) : CntW'(RecipTop));
  assign bit_idx = (rsqrt_q ? CntW'(RsqrtTop) : CntW'(RecipTop)) - step_q;
  assign dbit    = bit_idx == pos_q;
  assign t       = {rem_q, dbit};
  assign diff    = {1'b0, t} - {2'b0, x_q};
  assign qbit    = !diff[AccW];

  // ---- one square-root step on the pair completed by steps k-2, k-1 (k = 2, 4, .., 62) ------------
  logic            sqrt_on, rbit;
  logic [AccW+1:0] s, trial;
  logic [AccW+2:0] sdiff;
  assign sqrt_on = rsqrt_q && !step_q[0] && step_q >= CntW'(2) && step_q <= CntW'(RsqrtTop + 1);
  assign s       = {srem_q, pair_q};
  assign trial   = {1'b0, q_q, 2'b01};
  assign sdiff   = {1'b0, s} - {1'b0, trial};
  assign rbit    = !sdiff[AccW+2];

  logic last;
  assign last   = step_q == (rsqrt_q ? CntW'(RsqrtCycles - 1) : CntW'(RecipCycles - 1));
  assign done_o = run_q && last;
  assign r_o    = sat_q ? SatValue : {1'b0, q_q};

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      run_q <= 1'b0; rsqrt_q <= 1'b0; sat_q <= 1'b0; step_q <= '0; pos_q <= '0;
      x_q <= '0; rem_q <= '0; q_q <= '0; srem_q <= '0; pair_q <= '0;
    end else if (start_i) begin
      run_q   <= 1'b1;
      rsqrt_q <= rsqrt_i;
      sat_q   <= sat;
      step_q  <= '0;
      pos_q   <= pos;
      x_q     <= x_i[QW-1:0];
      rem_q   <= over ? lim[QW-1:0] : '0;  // < x unless saturated (then the result is not used)
      q_q     <= '0;
      srem_q  <= '0;
      pair_q  <= '0;
    end else if (run_q) begin
      run_q  <= !last;
      step_q <= step_q + CntW'(1);
      if (div_on) begin
        rem_q  <= qbit ? diff[QW-1:0] : t[QW-1:0];
        pair_q <= {pair_q[0], qbit};
        if (!rsqrt_q) q_q <= {q_q[QW-2:0], qbit};
      end
      if (sqrt_on) begin
        srem_q <= rbit ? sdiff[AccW-1:0] : s[AccW-1:0];
        q_q    <= {q_q[QW-2:0], rbit};
      end
    end
  end
endmodule

`default_nettype wire
