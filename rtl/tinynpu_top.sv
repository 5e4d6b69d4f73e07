// tinynpu top level: dispatcher, one queue and start control per queued unit,
// token channels, load and store DMA engines behind one DRAM port, the
// scratchpads, the tensor unit (T x T MAC array) and the vector ALU.  Every
// size comes from the generated package tinynpu_isa_pkg (the ISA and one
// architecture config).
//
// DRAM interface (the memory lives in the testbench), one request per DMA row:
//   read:  rd_req_valid_o/ready_i with addr (byte), bytes (1..T * acc bytes)
//          and an opaque tag; the memory answers in order with
//          rd_resp_valid_i, the row data (byte 0 in bits 7:0) and the same
//          tag, exactly beats + dram.latency_cycles - 2 cycles after the
//          request cycle (beats = ceil(bytes / dram.bytes_per_cycle); the
//          engine took the port the cycle before it presented the request).
//   write: wr_req_valid_o/ready_i with addr, bytes, data and tag; the memory
//          acknowledges with wr_ack_valid_i and the tag after the same delay.
// ready must stay high (the timing rules have no back-pressure); a request
// seen with ready low stops the machine with the DRAM-stall error.
// Trace: disp_o (dispatch of instruction disp_idx_o), start_o[u] and
// comp_o[u] per queued unit u (completion pulse in cycle e - 1).
`timescale 1ns / 1ps
`default_nettype none
`include "tinynpu_isa.vh"

module tinynpu_top import tinynpu_isa_pkg::*; #(
  parameter int ImemAw = 14,  // instruction memory of 2**ImemAw words
  parameter int IdxW   = 16,  // bits of an instruction index (>= ImemAw)
  localparam int N     = TNPU_NUM_QUEUED_UNITS,
  localparam int RdTagW = IdxW + 1 + TNPU_SIGNAL_W + TNPU_LOAD_SCOPE_W + TNPU_LOAD_SP_ROW_W + TNPU_LOAD_COLS_W,
  localparam int WrTagW = IdxW + 1 + TNPU_SIGNAL_W,
  localparam int RowW   = TNPU_ACC_ROW_WIDTH
) (
  input  wire logic                           clk_i,
  input  wire logic                           rst_ni,
  input  wire logic                           imem_we_i,
  input  wire logic [ImemAw-1:0]              imem_waddr_i,
  input  wire logic [TNPU_WORD_BITS-1:0]      imem_wdata_i,
  input  wire logic [ImemAw:0]                prog_len_i,
  input  wire logic                           start_i,
  output logic                                busy_o,
  output logic                                done_o,
  output logic                                error_o,
  output logic      [3:0]                     error_cause_o,
  output logic      [IdxW-1:0]                error_pc_o,
  output logic      [TNPU_CYCLE_BITS-1:0]     cycles_o,
  output logic                                rd_req_valid_o,
  input  wire logic                           rd_req_ready_i,
  output logic      [TNPU_LOAD_DRAM_W-1:0]    rd_req_addr_o,
  output logic      [TNPU_ROW_BYTES_BITS-1:0] rd_req_bytes_o,
  output logic      [RdTagW-1:0]              rd_req_tag_o,
  input  wire logic                           rd_resp_valid_i,
  input  wire logic [RowW-1:0]                rd_resp_data_i,
  input  wire logic [RdTagW-1:0]              rd_resp_tag_i,
  output logic                                wr_req_valid_o,
  input  wire logic                           wr_req_ready_i,
  output logic      [TNPU_STORE_DRAM_W-1:0]   wr_req_addr_o,
  output logic      [TNPU_ROW_BYTES_BITS-1:0] wr_req_bytes_o,
  output logic      [RowW-1:0]                wr_req_data_o,
  output logic      [WrTagW-1:0]              wr_req_tag_o,
  input  wire logic                           wr_ack_valid_i,
  input  wire logic [WrTagW-1:0]              wr_ack_tag_i,
  output logic                                disp_o,
  output logic      [IdxW-1:0]                disp_idx_o,
  output logic      [N-1:0]                   start_o,
  output logic      [N*IdxW-1:0]              start_idx_o,
  output logic      [N-1:0]                   comp_o,
  output logic      [N*IdxW-1:0]              comp_idx_o
);
  localparam int EntryW = IdxW + TNPU_WORD_BITS;  // a queue entry: {instruction index, word}

  // ---- instruction memory and dispatcher -----------------------------------
  logic [ImemAw-1:0]         imem_raddr;
  logic [TNPU_WORD_BITS-1:0] imem_rdata;
  tinynpu_imem #(.AddrW(ImemAw)) u_imem (
    .clk_i  (clk_i),
    .we_i   (imem_we_i),
    .waddr_i(imem_waddr_i),
    .wdata_i(imem_wdata_i),
    .raddr_i(imem_raddr),
    .rdata_o(imem_rdata)
  );

  logic [N-1:0]  q_full, q_push;
  logic [EntryW-1:0] q_wdata;
  logic          token_overflow, load_stall, store_stall;

  tinynpu_dispatch #(.ImemAw(ImemAw), .IdxW(IdxW)) u_dispatch (
    .clk_i           (clk_i),
    .rst_ni          (rst_ni),
    .start_i         (start_i),
    .prog_len_i      (prog_len_i),
    .imem_raddr_o    (imem_raddr),
    .imem_rdata_i    (imem_rdata),
    .q_full_i        (q_full),
    .q_push_o        (q_push),
    .q_data_o        (q_wdata),
    .comp_i          (comp_o),
    .token_overflow_i(token_overflow),
    .dram_stall_i    (load_stall || store_stall),
    .disp_o          (disp_o),
    .disp_idx_o      (disp_idx_o),
    .busy_o          (busy_o),
    .done_o          (done_o),
    .error_o         (error_o),
    .error_cause_o   (error_cause_o),
    .error_pc_o      (error_pc_o),
    .cycles_o        (cycles_o)
  );

  // ---- per queued unit: queue, start control, tokens -------------------------
  // What each unit's engine says about its queue head (indexed by unit id).
  logic [EntryW-1:0]        head      [N];
  logic [TNPU_OCC_BITS-1:0] head_occ  [N];
  logic [N-1:0]             head_hold, head_port, port_req, port_grant, occ_last;
  logic [TNPU_SIGNAL_W-1:0] comp_signal [N];
  logic [N*N-1:0]           consume, signal, avail;

  for (genvar u = 0; u < N; u++) begin : g_unit
    logic head_valid, pop;
    tinynpu_queue #(.Depth(TNPU_QUEUE_DEPTH), .Width(EntryW)) u_queue (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .push_i (q_push[u]),
      .data_i (q_wdata),
      .pop_i  (pop),
      .valid_o(head_valid),
      .data_o (head[u]),
      .full_o (q_full[u])
    );
    tinynpu_unit_ctrl u_ctrl (
      .clk_i       (clk_i),
      .rst_ni      (rst_ni),
      .head_valid_i(head_valid),
      .head_wait_i (head[u][TNPU_WAIT_LSB +: TNPU_WAIT_W]),
      .head_occ_i  (head_occ[u]),
      .head_hold_i (head_hold[u]),
      .head_port_i (head_port[u]),
      .tok_avail_i (avail[u*N +: N]),
      .consume_o   (consume[u*N +: N]),
      .port_req_o  (port_req[u]),
      .port_grant_i(port_grant[u]),
      .start_o     (pop),
      .occ_last_o  (occ_last[u])
    );
    assign start_o[u] = pop;
    assign start_idx_o[u*IdxW +: IdxW] = head[u][EntryW-1:TNPU_WORD_BITS];
    assign signal[u*N +: N] = comp_o[u] ? comp_signal[u] : '0;
  end

  tinynpu_tokens u_tokens (
    .clk_i     (clk_i),
    .rst_ni    (rst_ni),
    .consume_i (consume),
    .signal_i  (signal),
    .avail_o   (avail),
    .overflow_o(token_overflow)
  );

  // Only the DMA engines use the DRAM port; the others never request it.
  assign head_hold[TNPU_UNIT_TENSOR]  = 1'b0;
  assign head_hold[TNPU_UNIT_ALU]     = 1'b0;
  assign head_hold[TNPU_UNIT_STORE]   = 1'b0;
  assign head_port[TNPU_UNIT_TENSOR]  = 1'b0;
  assign head_port[TNPU_UNIT_ALU]     = 1'b0;
  assign head_port[TNPU_UNIT_STORE]   = 1'b1;
  assign port_grant[TNPU_UNIT_TENSOR] = 1'b0;
  assign port_grant[TNPU_UNIT_ALU]    = 1'b0;
  tinynpu_port_arbiter u_port (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .load_req_i   (port_req[TNPU_UNIT_LOAD]),
    .load_beats_i (head_occ[TNPU_UNIT_LOAD]),
    .store_req_i  (port_req[TNPU_UNIT_STORE]),
    .store_beats_i(head_occ[TNPU_UNIT_STORE]),
    .load_grant_o (port_grant[TNPU_UNIT_LOAD]),
    .store_grant_o(port_grant[TNPU_UNIT_STORE])
  );

  // ---- scratchpads -----------------------------------------------------------
  logic                          ld_wr_valid;
  logic [TNPU_LOAD_SCOPE_W-1:0]  ld_wr_scope;
  // Rows are ISA fields; the dispatcher checked them against each scratchpad, so high bits are 0.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [TNPU_LOAD_SP_ROW_W-1:0] ld_wr_row;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [RowW-1:0]               ld_wr_data;
  logic [TNPU_A_REG_ADDR_BITS-TNPU_TILE_BITS-1:0] a_tile;
  logic [TNPU_B_REG_ADDR_BITS-TNPU_TILE_BITS-1:0] b_tile;
  logic [TNPU_TILE*TNPU_IN_ROW_WIDTH-1:0]          a_tile_data, b_tile_data;

  tinynpu_spad_in #(.Rows(TNPU_A_REG_ROWS)) u_spad_a (
    .clk_i  (clk_i),
    .we_i   (ld_wr_valid && ld_wr_scope == TNPU_LOAD_SCOPE_W'(TNPU_SCOPE_A)),
    .waddr_i(ld_wr_row[TNPU_A_REG_ADDR_BITS-1:0]),
    .wdata_i(ld_wr_data[TNPU_IN_ROW_WIDTH-1:0]),
    .rtile_i(a_tile),
    .rdata_o(a_tile_data)
  );
  tinynpu_spad_in #(.Rows(TNPU_B_REG_ROWS)) u_spad_b (
    .clk_i  (clk_i),
    .we_i   (ld_wr_valid && ld_wr_scope == TNPU_LOAD_SCOPE_W'(TNPU_SCOPE_B)),
    .waddr_i(ld_wr_row[TNPU_B_REG_ADDR_BITS-1:0]),
    .wdata_i(ld_wr_data[TNPU_IN_ROW_WIDTH-1:0]),
    .rtile_i(b_tile),
    .rdata_o(b_tile_data)
  );

  logic                          t_we, alu_we;
  logic [TNPU_ACC_ADDR_BITS-1:0] t_addr, alu_dst, alu_src, st_raddr;
  logic [RowW-1:0]               t_rdata, t_wdata, alu_dst_data, alu_src_data, alu_wdata, st_rdata;
  tinynpu_spad_acc u_spad_acc (
    .clk_i          (clk_i),
    .load_we_i      (ld_wr_valid && ld_wr_scope == TNPU_LOAD_SCOPE_W'(TNPU_SCOPE_ACC)),
    .load_waddr_i   (ld_wr_row[TNPU_ACC_ADDR_BITS-1:0]),
    .load_wdata_i   (ld_wr_data),
    .tensor_addr_i  (t_addr),
    .tensor_rdata_o (t_rdata),
    .tensor_we_i    (t_we),
    .tensor_wdata_i (t_wdata),
    .alu_dst_addr_i (alu_dst),
    .alu_dst_rdata_o(alu_dst_data),
    .alu_dst_we_i   (alu_we),
    .alu_dst_wdata_i(alu_wdata),
    .alu_src_addr_i (alu_src),
    .alu_src_rdata_o(alu_src_data),
    .store_raddr_i  (st_raddr),
    .store_rdata_o  (st_rdata)
  );

  // ---- engines ---------------------------------------------------------------
  tinynpu_load_unit #(.IdxW(IdxW)) u_load (
    .clk_i          (clk_i),
    .rst_ni         (rst_ni),
    .head_i         (head[TNPU_UNIT_LOAD]),
    .start_i        (start_o[TNPU_UNIT_LOAD]),
    .head_occ_o     (head_occ[TNPU_UNIT_LOAD]),
    .head_hold_o    (head_hold[TNPU_UNIT_LOAD]),
    .head_port_o    (head_port[TNPU_UNIT_LOAD]),
    .rd_req_valid_o (rd_req_valid_o),
    .rd_req_ready_i (rd_req_ready_i),
    .rd_req_addr_o  (rd_req_addr_o),
    .rd_req_bytes_o (rd_req_bytes_o),
    .rd_req_tag_o   (rd_req_tag_o),
    .rd_resp_valid_i(rd_resp_valid_i),
    .rd_resp_data_i (rd_resp_data_i),
    .rd_resp_tag_i  (rd_resp_tag_i),
    .wr_valid_o     (ld_wr_valid),
    .wr_scope_o     (ld_wr_scope),
    .wr_row_o       (ld_wr_row),
    .wr_data_o      (ld_wr_data),
    .comp_o         (comp_o[TNPU_UNIT_LOAD]),
    .comp_signal_o  (comp_signal[TNPU_UNIT_LOAD]),
    .comp_idx_o     (comp_idx_o[TNPU_UNIT_LOAD*IdxW +: IdxW]),
    .stall_err_o    (load_stall)
  );

  tinynpu_tensor_unit #(.IdxW(IdxW)) u_tensor (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .head_i       (head[TNPU_UNIT_TENSOR]),
    .start_i      (start_o[TNPU_UNIT_TENSOR]),
    .head_occ_o   (head_occ[TNPU_UNIT_TENSOR]),
    .a_tile_o     (a_tile),
    .a_tile_data_i(a_tile_data),
    .b_tile_o     (b_tile),
    .b_tile_data_i(b_tile_data),
    .acc_addr_o   (t_addr),
    .acc_rdata_i  (t_rdata),
    .acc_we_o     (t_we),
    .acc_wdata_o  (t_wdata),
    .comp_o       (comp_o[TNPU_UNIT_TENSOR]),
    .comp_signal_o(comp_signal[TNPU_UNIT_TENSOR]),
    .comp_idx_o   (comp_idx_o[TNPU_UNIT_TENSOR*IdxW +: IdxW])
  );

  tinynpu_alu_unit #(.IdxW(IdxW)) u_alu (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .head_i       (head[TNPU_UNIT_ALU]),
    .start_i      (start_o[TNPU_UNIT_ALU]),
    .head_occ_o   (head_occ[TNPU_UNIT_ALU]),
    .occ_last_i   (occ_last[TNPU_UNIT_ALU]),
    .dst_addr_o   (alu_dst),
    .dst_rdata_i  (alu_dst_data),
    .dst_we_o     (alu_we),
    .dst_wdata_o  (alu_wdata),
    .src_addr_o   (alu_src),
    .src_rdata_i  (alu_src_data),
    .comp_o       (comp_o[TNPU_UNIT_ALU]),
    .comp_signal_o(comp_signal[TNPU_UNIT_ALU]),
    .comp_idx_o   (comp_idx_o[TNPU_UNIT_ALU*IdxW +: IdxW])
  );

  tinynpu_store_unit #(.IdxW(IdxW)) u_store (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .head_i        (head[TNPU_UNIT_STORE]),
    .start_i       (start_o[TNPU_UNIT_STORE]),
    .head_occ_o    (head_occ[TNPU_UNIT_STORE]),
    .acc_raddr_o   (st_raddr),
    .acc_rdata_i   (st_rdata),
    .wr_req_valid_o(wr_req_valid_o),
    .wr_req_ready_i(wr_req_ready_i),
    .wr_req_addr_o (wr_req_addr_o),
    .wr_req_bytes_o(wr_req_bytes_o),
    .wr_req_data_o (wr_req_data_o),
    .wr_req_tag_o  (wr_req_tag_o),
    .wr_ack_valid_i(wr_ack_valid_i),
    .wr_ack_tag_i  (wr_ack_tag_i),
    .comp_o        (comp_o[TNPU_UNIT_STORE]),
    .comp_signal_o (comp_signal[TNPU_UNIT_STORE]),
    .comp_idx_o    (comp_idx_o[TNPU_UNIT_STORE*IdxW +: IdxW]),
    .stall_err_o   (store_stall)
  );
endmodule

`default_nettype wire
