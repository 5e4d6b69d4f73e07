// The reductions of vredmax / vredsum / vredsq: the ALU feeds one source row per
// step (one segment of one logical row), and this module keeps the logical row's
// running maximum or exact sum.  On the row's last step result_o is its value:
// the maximum, or sat32(round(sum / 2^shift)) with ties toward +infinity.
// The sum is exact: at most 2^N_W segments of T lanes of squares below 2^(2*AccW-2)
// fit in SumW bits, so nothing wraps (the simulator sums Python integers).
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_alu_reduce import tinynpu_isa_pkg::*; #(
  parameter int ColsW  = TNPU_VREDSUM_COLS_W,
  parameter int ShiftW = TNPU_VREDSUM_SHIFT_W
) (
  input  wire logic                              clk_i,
  input  wire logic                              rst_ni,
  input  wire logic                              step_i,   // a source row is on row_i in this cycle
  input  wire logic                              first_i,  // it is its logical row's first segment
  input  wire logic                              last_i,   // its last: only lanes below cols_i count
  input  wire logic                              max_i,    // vredmax (else a sum)
  input  wire logic                              sq_i,     // vredsq: sum the squares
  input  wire logic [ColsW-1:0]                  cols_i,
  input  wire logic [ShiftW-1:0]                 shift_i,
  input  wire logic [TNPU_ACC_ROW_WIDTH-1:0]     row_i,
  input  wire logic [2*TNPU_ACC_ROW_WIDTH-1:0]   squares_i, // each lane's x * x (the ALU's lane multipliers)
  output logic      [TNPU_ACC_BITS-1:0]          result_o
);
  localparam int AccW = TNPU_ACC_BITS;
  localparam int SumW = 2 * AccW + TNPU_VREDSUM_N_W + TNPU_TILE_BITS + 1;  // exact: see the header

  logic signed [SumW-1:0] run_q, row_sum, row_max, total;

  // Each lane sign-extended to SumW bits (its value, and its square, which is never negative).
  logic [TNPU_TILE*SumW-1:0] lane_x, lane_x2;
  for (genvar c = 0; c < TNPU_TILE; c++) begin : g_lane
    assign lane_x[c*SumW +: SumW]  = {{(SumW - AccW){row_i[c*AccW + AccW-1]}}, row_i[c*AccW +: AccW]};
    assign lane_x2[c*SumW +: SumW] = {{(SumW - 2*AccW){1'b0}}, squares_i[c*2*AccW +: 2*AccW]};
  end

  // This row's contribution: lanes past cols_i of the last segment are not elements of the matrix.
  always_comb begin
    row_sum = '0;
    row_max = {{(SumW - AccW + 1){1'b1}}, {(AccW - 1){1'b0}}};  // the most negative int32: below every lane
    for (int c = 0; c < TNPU_TILE; c++) begin
      if (!last_i || c < int'(cols_i)) begin
        row_sum = row_sum + $signed(sq_i ? lane_x2[c*SumW +: SumW] : lane_x[c*SumW +: SumW]);
        if ($signed(lane_x[c*SumW +: SumW]) > row_max) row_max = $signed(lane_x[c*SumW +: SumW]);
      end
    end
  end

  always_comb begin
    if (max_i) total = (first_i || row_max > run_q) ? row_max : run_q;
    else       total = first_i ? row_sum : run_q + row_sum;
  end

  // sat32((total + 2^shift / 2) >> shift): one bit wider, so adding the half cannot wrap.
  logic signed [SumW:0] rounded;
  logic                 fits;
  // (a concatenation is unsigned: without $signed, >>> would shift a negative sum in zeros)
  assign rounded  = $signed({total[SumW-1], total} + (((SumW + 1)'(1) << shift_i) >> 1)) >>> shift_i;
  assign fits     = (rounded[SumW:AccW-1] == '0) || (rounded[SumW:AccW-1] == '1);
  assign result_o = max_i ? total[AccW-1:0]
                  : fits ? rounded[AccW-1:0] : {rounded[SumW], {(AccW - 1){~rounded[SumW]}}};

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) run_q <= '0;
    else if (step_i) run_q <= total;
  end
endmodule

`default_nettype wire
