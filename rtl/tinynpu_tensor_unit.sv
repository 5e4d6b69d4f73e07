// The tensor unit: runs a tmm block of m*n*k steps of T x T x T, i outer, j,
// kk inner.  A step takes tmm_interval_cycles (at least T): it computes one
// output row per cycle in its first T cycles against a B tile read whole
// from its T row banks, and idles for the rest.  A tmm that starts in cycle s
// occupies cycles s + 1 .. s + occ; the next may start in cycle s + occ.
// Completion is that last cycle delayed by tmm_latency_cycles - 1, i.e. the
// pulse is in cycle s + occ + latency - 1 and the result is usable from
// e = s + occ + latency.
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_tensor_unit import tinynpu_isa_pkg::*; #(
  parameter int IdxW = 16,
  localparam int ATileBits = TNPU_A_REG_ADDR_BITS - TNPU_TILE_BITS,  // bits of an a_reg tile address
  localparam int BTileBits = TNPU_B_REG_ADDR_BITS - TNPU_TILE_BITS,
  localparam int TileWidth = TNPU_TILE * TNPU_IN_ROW_WIDTH           // bits of one input tile
) (
  input  wire logic                           clk_i,
  input  wire logic                           rst_ni,
  // The queue head {instruction index, word}: fields sit at their ISA positions; opcode,
  // funct and reserved bits were checked at dispatch.
  /* verilator lint_off UNUSEDSIGNAL */
  input  wire logic [IdxW+TNPU_WORD_BITS-1:0] head_i,
  /* verilator lint_on UNUSEDSIGNAL */
  input  wire logic                           start_i,
  output logic      [TNPU_OCC_BITS-1:0]       head_occ_o,
  // tile read ports of a_reg and b_reg, read-modify-write port of acc
  output logic      [ATileBits-1:0]           a_tile_o,
  input  wire logic [TileWidth-1:0]           a_tile_data_i,
  output logic      [BTileBits-1:0]           b_tile_o,
  input  wire logic [TileWidth-1:0]           b_tile_data_i,
  output logic      [TNPU_ACC_ADDR_BITS-1:0]  acc_addr_o,  // read, then written back
  input  wire logic [TNPU_ACC_ROW_WIDTH-1:0]  acc_rdata_i,
  output logic                                acc_we_o,
  output logic      [TNPU_ACC_ROW_WIDTH-1:0]  acc_wdata_o,
  output logic                                comp_o,
  output logic      [TNPU_SIGNAL_W-1:0]       comp_signal_o,
  output logic      [IdxW-1:0]                comp_idx_o
);
  localparam int Delay = TNPU_TMM_LATENCY - 1;  // >= 0: the config requires latency >= 1
  localparam int StepW = $clog2(TNPU_TMM_INTERVAL + 1);  // a cycle of a step, 0 .. interval - 1
  localparam int MW = TNPU_TMM_M_W;             // m, n and k have one width (checked by the generator test)

  logic [IdxW-1:0]           head_idx;
  logic                      head_accumulate;
  logic [TNPU_TMM_ACC_W-1:0] head_acc_t;
  logic [TNPU_TMM_A_W-1:0]   head_a_t;
  logic [TNPU_TMM_B_W-1:0]   head_b_t;
  logic [MW-1:0]             head_m, head_n, head_k;
  logic [TNPU_SIGNAL_W-1:0]  head_signal;
  assign head_idx        = head_i[TNPU_WORD_BITS +: IdxW];
  assign head_accumulate = head_i[TNPU_TMM_ACCUMULATE_LSB];
  assign head_acc_t      = head_i[TNPU_TMM_ACC_LSB +: TNPU_TMM_ACC_W];
  assign head_a_t        = head_i[TNPU_TMM_A_LSB +: TNPU_TMM_A_W];
  assign head_b_t        = head_i[TNPU_TMM_B_LSB +: TNPU_TMM_B_W];
  assign head_m          = head_i[TNPU_TMM_M_LSB +: MW];
  assign head_n          = head_i[TNPU_TMM_N_LSB +: MW];
  assign head_k          = head_i[TNPU_TMM_K_LSB +: MW];
  assign head_signal     = head_i[TNPU_SIGNAL_LSB +: TNPU_SIGNAL_W];
  assign head_occ_o = TNPU_OCC_BITS'(head_m) * TNPU_OCC_BITS'(head_n) * TNPU_OCC_BITS'(head_k)
                      * TNPU_OCC_BITS'(TNPU_TMM_INTERVAL);

  logic                           active_d, active_q, accumulate_d, accumulate_q;
  logic [TNPU_TMM_ACC_W-1:0]      acc_t_d, acc_t_q;
  logic [TNPU_TMM_A_W-1:0]        a_t_d, a_t_q;
  logic [TNPU_TMM_B_W-1:0]        b_t_d, b_t_q;
  logic [MW-1:0]                  m_d, m_q, n_d, n_q, k_d, k_q, i_d, i_q, j_d, j_q, kk_d, kk_q;
  logic [StepW-1:0]               c_d, c_q;  // the cycle of the current step; row c_q while c_q < T
  logic [TNPU_TILE_BITS-1:0]      r;
  logic [TNPU_SIGNAL_W-1:0]       signal_d, signal_q;
  logic [IdxW-1:0]                idx_d, idx_q;
  logic                           last_cycle;

  assign r          = TNPU_TILE_BITS'(c_q);
  assign last_cycle = active_q && (c_q == StepW'(TNPU_TMM_INTERVAL - 1)) && (kk_q == k_q - 1'b1)
                      && (j_q == n_q - 1'b1) && (i_q == m_q - 1'b1);

  // Tile addresses of step (i, j, kk): A (i*k + kk), B (j*k + kk), acc (i*n + j).
  // Tile sums are computed as wide as a row field; the dispatcher checked they fit the scratchpads.
  localparam int SumW = TNPU_LOAD_SP_ROW_W;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [SumW-1:0] a_tile, b_tile, acc_tile;
  /* verilator lint_on UNUSEDSIGNAL */
  assign a_tile      = SumW'(a_t_q) + SumW'(i_q) * SumW'(k_q) + SumW'(kk_q);
  assign b_tile      = SumW'(b_t_q) + SumW'(j_q) * SumW'(k_q) + SumW'(kk_q);
  assign acc_tile    = SumW'(acc_t_q) + SumW'(i_q) * SumW'(n_q) + SumW'(j_q);
  assign a_tile_o    = ATileBits'(a_tile);
  assign b_tile_o    = BTileBits'(b_tile);
  assign acc_addr_o  = TNPU_ACC_ADDR_BITS'({acc_tile, r});
  assign acc_we_o    = active_q && (c_q < StepW'(TNPU_TILE));

  logic [TNPU_IN_ROW_WIDTH-1:0]  a_row;
  logic [TNPU_ACC_ROW_WIDTH-1:0] dot;
  assign a_row = a_tile_data_i[r*TNPU_IN_ROW_WIDTH +: TNPU_IN_ROW_WIDTH];

  tinynpu_mac_array u_mac (
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
    logic [Delay-1:0]         valid_q;
    logic [TNPU_SIGNAL_W-1:0] sig_q [Delay];
    logic [IdxW-1:0]          id_q  [Delay];
    always_ff @(posedge clk_i or negedge rst_ni) begin
      if (!rst_ni) begin
        for (int d = 0; d < Delay; d++) begin
          valid_q[d] <= 1'b0;
          sig_q[d]   <= '0;
          id_q[d]    <= '0;
        end
      end else begin
        valid_q[0] <= last_cycle;
        sig_q[0]   <= signal_q;
        id_q[0]    <= idx_q;
        for (int d = 1; d < Delay; d++) begin
          valid_q[d] <= valid_q[d-1];
          sig_q[d]   <= sig_q[d-1];
          id_q[d]    <= id_q[d-1];
        end
      end
    end
    assign comp_o        = valid_q[Delay-1];
    assign comp_signal_o = sig_q[Delay-1];
    assign comp_idx_o    = id_q[Delay-1];
  end

  always_comb begin
    active_d     = active_q;
    accumulate_d = accumulate_q;
    acc_t_d      = acc_t_q;
    a_t_d        = a_t_q;
    b_t_d        = b_t_q;
    m_d          = m_q;
    n_d          = n_q;
    k_d          = k_q;
    i_d          = i_q;
    j_d          = j_q;
    kk_d         = kk_q;
    c_d          = c_q;
    signal_d     = signal_q;
    idx_d        = idx_q;
    if (active_q) begin
      c_d = c_q + 1'b1;
      if (c_q == StepW'(TNPU_TMM_INTERVAL - 1)) begin
        c_d = '0;
        if (kk_q != k_q - 1'b1) kk_d = kk_q + 1'b1;
        else begin
          kk_d = '0;
          if (j_q != n_q - 1'b1) j_d = j_q + 1'b1;
          else begin
            j_d = '0;
            if (i_q != m_q - 1'b1) i_d = i_q + 1'b1;
            else active_d = 1'b0;
          end
        end
      end
    end
    if (start_i) begin
      active_d     = 1'b1;
      accumulate_d = head_accumulate;
      acc_t_d      = head_acc_t;
      a_t_d        = head_a_t;
      b_t_d        = head_b_t;
      m_d          = head_m;
      n_d          = head_n;
      k_d          = head_k;
      i_d          = '0;
      j_d          = '0;
      kk_d         = '0;
      c_d          = '0;
      signal_d     = head_signal;
      idx_d        = head_idx;
    end
  end

  always_ff @(posedge clk_i or negedge rst_ni) begin
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
      c_q          <= '0;
      signal_q     <= '0;
      idx_q        <= '0;
    end else begin
      active_q     <= active_d;
      accumulate_q <= accumulate_d;
      acc_t_q      <= acc_t_d;
      a_t_q        <= a_t_d;
      b_t_q        <= b_t_d;
      m_q          <= m_d;
      n_q          <= n_d;
      k_q          <= k_d;
      i_q          <= i_d;
      j_q          <= j_d;
      kk_q         <= kk_d;
      c_q          <= c_d;
      signal_q     <= signal_d;
      idx_q        <= idx_d;
    end
  end
endmodule

`default_nettype wire
