// The tensor unit: runs a tmm block of m*n*k tmm16 steps, i outer, j, kk
// inner.  A step computes one output row per cycle for TILE cycles (so
// tmm_interval_cycles must equal the tile edge) against a B tile read whole
// from its TILE row banks.  A tmm that starts in cycle s computes in cycles
// s + 1 .. s + occ; the next may start in cycle s + occ.  Completion is that
// last cycle delayed by tmm_latency_cycles - 1, i.e. the pulse is in cycle
// s + occ + latency - 1 and the result is usable from e = s + occ + latency.
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_tensor_unit #(
  parameter int IDX_W = 16,
  parameter int A_TILE_BITS = 7,
  parameter int B_TILE_BITS = 7,
  parameter int ACC_ROW_BITS = 10,
  parameter int TileBits = 2048,   // bits of one input tile (tile x tile x input bits)
  parameter int AccRowBits = 512   // bits of one accumulator row
) (
  input  wire logic                         clk_i,
  input  wire logic                         rst_ni,
  input  wire logic                         q_valid_i,
  input  wire logic [IDX_W+127:0]           q_data_i,
  output logic                              q_pop_o,
  input  wire logic [3:0]                   tok_avail_i,
  output logic      [3:0]                   consume_o,
  output logic      [A_TILE_BITS-1:0]       a_tile_o,
  input  wire logic [TileBits-1:0]          a_tile_data_i,
  output logic      [B_TILE_BITS-1:0]       b_tile_o,
  input  wire logic [TileBits-1:0]          b_tile_data_i,
  output logic      [ACC_ROW_BITS-1:0]      acc_raddr_o,
  input  wire logic [AccRowBits-1:0]        acc_rdata_i,
  output logic                              acc_we_o,
  output logic      [ACC_ROW_BITS-1:0]      acc_waddr_o,
  output logic      [AccRowBits-1:0]        acc_wdata_o,
  output logic                              comp_o,
  output logic      [3:0]                   comp_signal_o,
  output logic      [IDX_W-1:0]             comp_idx_o,
  output logic                              start_o,
  output logic      [IDX_W-1:0]             start_idx_o
);
  `include "tinynpu_isa.vh"
  localparam int InRowBits  = TNPU_TILE * TNPU_INPUT_BITS;
  localparam int RBits      = $clog2(TNPU_TILE);
  localparam int Delay      = TNPU_TMM_LATENCY - 1;  // >= 0: the config requires latency >= 1

  logic [127:0]     word;
  logic [IDX_W-1:0] idx;
  logic [3:0]       wait_m;
  assign word   = q_data_i[127:0];
  assign idx    = q_data_i[IDX_W+127:128];
  assign wait_m = word[TNPU_TMM_WAIT_LSB +: TNPU_TMM_WAIT_W];

  logic             active_q, accumulate_q;
  logic [9:0]       acc_t_q, a_t_q, b_t_q;
  logic [6:0]       m_q, n_q, k_q, i_q, j_q, kk_q;
  logic [RBits-1:0] r_q;
  logic [3:0]       signal_q;
  logic [IDX_W-1:0] idx_q;
  logic             last_cycle;

  assign last_cycle = active_q && (r_q == RBits'(TNPU_TILE - 1)) && (kk_q == k_q - 1'b1)
                      && (j_q == n_q - 1'b1) && (i_q == m_q - 1'b1);
  assign start_o     = q_valid_i && ((wait_m & ~tok_avail_i) == 4'b0) && (!active_q || last_cycle);
  assign start_idx_o = idx;
  assign q_pop_o     = start_o;
  assign consume_o   = start_o ? wait_m : 4'b0;

  // Tile addresses of step (i, j, kk): A (i*k + kk), B (j*k + kk), acc (i*n + j).
  // Tile sums are computed wide; the dispatcher checked they fit the scratchpads.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [13:0] a_tile, b_tile, acc_tile;
  /* verilator lint_on UNUSEDSIGNAL */
  assign a_tile   = 14'(a_t_q) + 14'(i_q) * 14'(k_q) + 14'(kk_q);
  assign b_tile   = 14'(b_t_q) + 14'(j_q) * 14'(k_q) + 14'(kk_q);
  assign acc_tile = 14'(acc_t_q) + 14'(i_q) * 14'(n_q) + 14'(j_q);
  assign a_tile_o = A_TILE_BITS'(a_tile);
  assign b_tile_o = B_TILE_BITS'(b_tile);
  assign acc_raddr_o = ACC_ROW_BITS'({acc_tile, r_q});
  assign acc_waddr_o = acc_raddr_o;
  assign acc_we_o    = active_q;

  logic [InRowBits-1:0]  a_row;
  logic [AccRowBits-1:0] dot;
  assign a_row = a_tile_data_i[r_q*InRowBits +: InRowBits];

  tinynpu_mac_array #(
    .TILE (TNPU_TILE),
    .IN_W (TNPU_INPUT_BITS),
    .ACC_W(TNPU_ACC_BITS)
  ) u_mac (
    .a_row_i (a_row),
    .b_tile_i(b_tile_data_i),
    .dot_o   (dot)
  );

  logic overwrite;
  assign overwrite = (kk_q == '0) && !accumulate_q;
  for (genvar l = 0; l < TNPU_TILE; l++) begin : g_acc
    assign acc_wdata_o[l*TNPU_ACC_BITS +: TNPU_ACC_BITS] =
        dot[l*TNPU_ACC_BITS +: TNPU_ACC_BITS] + (overwrite ? '0 : acc_rdata_i[l*TNPU_ACC_BITS +: TNPU_ACC_BITS]);
  end

  // Completion delay line: the MAC pipeline depth of the timing model.
  if (Delay == 0) begin : g_nodelay
    assign comp_o        = last_cycle;
    assign comp_signal_o = signal_q;
    assign comp_idx_o    = idx_q;
  end else begin : g_delay
    logic [Delay-1:0] v_q;
    logic [3:0]       sig_q [0:Delay-1];
    logic [IDX_W-1:0] id_q  [0:Delay-1];
    always @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        for (int d = 0; d < Delay; d++) begin
          v_q[d]   <= 1'b0;
          sig_q[d] <= '0;
          id_q[d]  <= '0;
        end
      end else begin
        v_q[0]   <= last_cycle;
        sig_q[0] <= signal_q;
        id_q[0]  <= idx_q;
        for (int d = 1; d < Delay; d++) begin
          v_q[d]   <= v_q[d-1];
          sig_q[d] <= sig_q[d-1];
          id_q[d]  <= id_q[d-1];
        end
      end
    end
    assign comp_o        = v_q[Delay-1];
    assign comp_signal_o = sig_q[Delay-1];
    assign comp_idx_o    = id_q[Delay-1];
  end

  always @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      active_q     <= 1'b0;
      accumulate_q <= 1'b0;
      acc_t_q      <= '0;
      a_t_q        <= '0;
      b_t_q        <= '0;
      m_q          <= '0;
      n_q          <= '0;
      k_q          <= '0;
      i_q          <= '0;
      j_q          <= '0;
      kk_q         <= '0;
      r_q          <= '0;
      signal_q     <= '0;
      idx_q        <= '0;
    end else begin
      if (active_q) begin
        r_q <= r_q + 1'b1;
        if (r_q == RBits'(TNPU_TILE - 1)) begin
          if (kk_q != k_q - 1'b1) kk_q <= kk_q + 1'b1;
          else begin
            kk_q <= '0;
            if (j_q != n_q - 1'b1) j_q <= j_q + 1'b1;
            else begin
              j_q <= '0;
              if (i_q != m_q - 1'b1) i_q <= i_q + 1'b1;
              else active_q <= 1'b0;
            end
          end
        end
      end
      if (start_o) begin
        active_q     <= 1'b1;
        accumulate_q <= word[TNPU_TMM_ACCUMULATE_LSB];
        acc_t_q      <= word[TNPU_TMM_ACC_LSB +: TNPU_TMM_ACC_W];
        a_t_q        <= word[TNPU_TMM_A_LSB +: TNPU_TMM_A_W];
        b_t_q        <= word[TNPU_TMM_B_LSB +: TNPU_TMM_B_W];
        m_q          <= word[TNPU_TMM_M_LSB +: TNPU_TMM_M_W];
        n_q          <= word[TNPU_TMM_N_LSB +: TNPU_TMM_N_W];
        k_q          <= word[TNPU_TMM_K_LSB +: TNPU_TMM_K_W];
        i_q          <= '0;
        j_q          <= '0;
        kk_q         <= '0;
        r_q          <= '0;
        signal_q     <= word[TNPU_TMM_SIGNAL_LSB +: TNPU_TMM_SIGNAL_W];
        idx_q        <= idx;
      end
    end
  end
endmodule

`default_nettype wire
