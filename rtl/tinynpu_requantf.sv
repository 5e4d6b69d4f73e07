// One lane of vrequantf: y = rint(binary32(binary32(x) * s)), saturated to int32, every rounding to
// nearest with ties to even (isa.yaml).  Combinational.  The 24 x 24 mantissa product is not made
// here: the lane's multiplier (shared with vmul and vrequant) multiplies mant_a_o by mant_b_o and
// returns the product on prod_i.
//   1. x -> binary32: |x| normalized by its leading-zero count, rounded to 24 significant bits:
//      |x| ~ xm * 2^xe with xm in [2^23, 2^24).
//   2. s = sm * 2^(es - 150), sm = 1.mantissa (a zero or subnormal s makes every product round to
//      0: |x * s| < 2^31 * 2^-126; an exponent of 255 saturates by the sign of x * s).
//   3. xm * sm (48 bits) rounded to 24 significant bits: pm * 2^e, pm in [2^23, 2^24).  Rounding
//      as if the exponent range were unbounded is exact here: a product below binary32's normal
//      range is below 2^-126 and becomes 0 whichever way it rounds, and one above its range is
//      far past the saturation bound 2^31.
//   4. pm * 2^e to an integer: e >= 8 saturates (pm * 2^e >= 2^31), 0 <= e < 8 shifts left,
//      -24 <= e < 0 shifts right rounding half to even, e < -24 gives 0 (below one half).
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_requantf (
  input  wire logic [31:0] x_i,       // the int32 accumulator value
  input  wire logic [31:0] scale_i,   // the column's scale, a binary32 bit pattern
  output logic      [23:0] mant_a_o,  // to the lane's multiplier: x's significand
  output logic      [23:0] mant_b_o,  //   and s's
  input  wire logic [47:0] prod_i,    // mant_a_o * mant_b_o
  output logic      [31:0] y_o
);
  // ---- 1. x to binary32 ----
  logic        x_neg;
  logic [31:0] x_mag, x_norm;
  logic [4:0]  x_lz;
  assign x_neg = x_i[31];
  assign x_mag = x_neg ? 32'(-x_i) : x_i;  // |-2^31| = 2^31 fits unsigned
  always_comb begin
    x_lz = '0;
    for (int i = 0; i < 32; i++) begin
      if (x_mag[i]) x_lz = 5'(31 - i);  // the highest set bit wins
    end
  end
  assign x_norm = x_mag << x_lz;

  logic [24:0] x_round;  // 24 bits rounded to nearest even; bit 24 set when that carries out
  assign x_round = {1'b0, x_norm[31:8]}
                 + 25'(x_norm[7] && (x_norm[6:0] != '0 || x_norm[8]));
  assign mant_a_o = x_round[24] ? 24'h800000 : x_round[23:0];

  // ---- 2. s ----
  logic [7:0] s_exp;
  assign s_exp    = scale_i[30:23];
  assign mant_b_o = {1'b1, scale_i[22:0]};

  // ---- 3. the product rounded to 24 significant bits ----
  // |x * s| = prod * 2^(xe + es - 150), xe = 8 - lz (+1 on carry): e below is the exponent of pm's
  // last bit.  Range: -149 .. 138, in 10 signed bits.
  logic signed [9:0] p_exp0, p_exp;
  logic [23:0] p_top;
  logic        p_guard, p_sticky;
  logic [24:0] p_round;
  logic [23:0] p_mant;
  assign p_exp0   = 10'sd8 - $signed({5'b0, x_lz}) + $signed({9'b0, x_round[24]})
                  + $signed({2'b0, s_exp}) - 10'sd150 + (prod_i[47] ? 10'sd24 : 10'sd23);
  assign p_top    = prod_i[47] ? prod_i[47:24] : prod_i[46:23];
  assign p_guard  = prod_i[47] ? prod_i[23] : prod_i[22];
  assign p_sticky = prod_i[47] ? (prod_i[22:0] != '0) : (prod_i[21:0] != '0);
  assign p_round  = {1'b0, p_top} + 25'(p_guard && (p_sticky || p_top[0]));
  assign p_mant   = p_round[24] ? 24'h800000 : p_round[23:0];
  assign p_exp    = p_exp0 + $signed({9'b0, p_round[24]});

  // ---- 4. to an integer, rounding half to even ----
  logic [48:0] r_shifted;  // {pm, 25 zero bits} >> -e: integer part in [48:25], guard [24], sticky [23:0]
  logic [4:0]  r_right;
  logic [31:0] mag;
  assign r_right   = 5'(-p_exp);  // used only for -24 <= e < 0
  assign r_shifted = {p_mant, 25'b0} >> r_right;
  always_comb begin
    if (p_exp >= 10'sd0) begin
      mag = 32'(p_mant) << p_exp[2:0];  // e < 8 here: below 2^31
    end else if (p_exp >= -10'sd24) begin
      mag = 32'(r_shifted[48:25])
          + 32'(r_shifted[24] && (r_shifted[23:0] != '0 || r_shifted[25]));
    end else begin
      mag = '0;
    end
  end

  logic y_neg, saturate;
  assign y_neg    = x_neg ^ scale_i[31];
  assign saturate = (s_exp == 8'hff) || (p_exp >= 10'sd8);
  always_comb begin
    if (x_i == '0 || s_exp == '0) begin
      y_o = '0;
    end else if (saturate) begin
      y_o = y_neg ? 32'h8000_0000 : 32'h7fff_ffff;
    end else begin
      y_o = y_neg ? 32'(-mag) : mag;
    end
  end
endmodule

`default_nettype wire
