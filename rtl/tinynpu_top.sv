// tinynpu top level: dispatcher, four unit queues, token channels, load and
// store DMA engines behind one DRAM port, the scratchpads, the tensor unit
// (16x16 MAC array) and the vector ALU.
//
// DRAM interface (the memory lives in the testbench), one request per DMA row:
//   read:  rd_req_valid_o/ready_i with addr (byte), bytes (1..64) and an
//          opaque tag; the memory answers in order with rd_resp_valid_i, the
//          row data (byte 0 in bits 7:0) and the same tag, exactly
//          beats + dram.latency_cycles - 2 cycles after the request cycle
//          (beats = ceil(bytes / dram.bytes_per_cycle); the engine took the
//          port the cycle before it presented the request).
//   write: wr_req_valid_o/ready_i with addr, bytes, data and tag; the memory
//          acknowledges with wr_ack_valid_i and the tag after the same delay.
// ready must stay high (the timing rules have no back-pressure); a request
// seen with ready low stops the machine with the DRAM-stall error.
// Trace: disp_o (dispatch of instruction disp_idx_o), start_o[u] and
// comp_o[u] per queued unit u (completion pulse in cycle e - 1).
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_top #(
  parameter int IMEM_AW = 14,
  parameter int IDX_W   = 16,
  localparam int TagW   = IDX_W + 26,
  localparam int WTagW  = IDX_W + 5,
  localparam int RowW   = 512
) (
  input  wire logic               clk_i,
  input  wire logic               rst_ni,
  input  wire logic               imem_we_i,
  input  wire logic [IMEM_AW-1:0] imem_waddr_i,
  input  wire logic [127:0]       imem_wdata_i,
  input  wire logic [IMEM_AW:0]   prog_len_i,
  input  wire logic               start_i,
  output logic                    busy_o,
  output logic                    done_o,
  output logic                    error_o,
  output logic      [3:0]         error_cause_o,
  output logic      [IDX_W-1:0]   error_pc_o,
  output logic      [31:0]        cycles_o,
  output logic                    rd_req_valid_o,
  input  wire logic               rd_req_ready_i,
  output logic      [31:0]        rd_req_addr_o,
  output logic      [6:0]         rd_req_bytes_o,
  output logic      [TagW-1:0]    rd_req_tag_o,
  input  wire logic               rd_resp_valid_i,
  input  wire logic [RowW-1:0]    rd_resp_data_i,
  input  wire logic [TagW-1:0]    rd_resp_tag_i,
  output logic                    wr_req_valid_o,
  input  wire logic               wr_req_ready_i,
  output logic      [31:0]        wr_req_addr_o,
  output logic      [6:0]         wr_req_bytes_o,
  output logic      [RowW-1:0]    wr_req_data_o,
  output logic      [WTagW-1:0]   wr_req_tag_o,
  input  wire logic               wr_ack_valid_i,
  input  wire logic [WTagW-1:0]   wr_ack_tag_i,
  output logic                    disp_o,
  output logic      [IDX_W-1:0]   disp_idx_o,
  output logic      [3:0]         start_o,
  output logic      [4*IDX_W-1:0] start_idx_o,
  output logic      [3:0]         comp_o,
  output logic      [4*IDX_W-1:0] comp_idx_o
);
  `include "tinynpu_isa.vh"
  localparam int QW = IDX_W + 128;
  localparam int InRowW = TNPU_TILE * TNPU_INPUT_BITS;
  localparam int ABits = $clog2(TNPU_A_REG_ROWS);
  localparam int BBits = $clog2(TNPU_B_REG_ROWS);
  localparam int AccBits = $clog2(TNPU_ACC_ROWS);
  localparam int TBits = $clog2(TNPU_TILE);

  // ---- instruction memory and dispatcher -----------------------------------
  logic [IMEM_AW-1:0] imem_raddr;
  logic [127:0]       imem_rdata;
  tinynpu_imem #(.AW(IMEM_AW)) u_imem (
    .clk_i  (clk_i),
    .we_i   (imem_we_i),
    .waddr_i(imem_waddr_i),
    .wdata_i(imem_wdata_i),
    .raddr_i(imem_raddr),
    .rdata_o(imem_rdata)
  );

  logic [3:0]    q_full, q_push, q_valid, q_pop;
  logic [QW-1:0] q_wdata;
  logic [QW-1:0] q_head [0:3];
  logic          token_overflow, load_stall, store_stall;

  tinynpu_dispatch #(.IMEM_AW(IMEM_AW), .IDX_W(IDX_W)) u_dispatch (
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

  for (genvar u = 0; u < 4; u++) begin : g_queue
    tinynpu_queue #(.DEPTH(TNPU_QUEUE_DEPTH), .WIDTH(QW)) u_queue (
      .clk_i  (clk_i),
      .rst_ni (rst_ni),
      .push_i (q_push[u]),
      .data_i (q_wdata),
      .pop_i  (q_pop[u]),
      .valid_o(q_valid[u]),
      .data_o (q_head[u]),
      .full_o (q_full[u])
    );
  end

  // ---- token channels ------------------------------------------------------
  logic [3:0]  consume [0:3];
  logic [3:0]  comp_signal [0:3];
  logic [15:0] consume_flat, signal_flat, avail;
  for (genvar u = 0; u < 4; u++) begin : g_tok
    assign consume_flat[u*4 +: 4] = consume[u];
    assign signal_flat[u*4 +: 4]  = comp_o[u] ? comp_signal[u] : 4'b0;
  end
  tinynpu_tokens u_tokens (
    .clk_i     (clk_i),
    .rst_ni    (rst_ni),
    .consume_i (consume_flat),
    .signal_i  (signal_flat),
    .avail_o   (avail),
    .overflow_o(token_overflow)
  );

  // ---- DRAM port -----------------------------------------------------------
  logic        load_req, store_req, load_grant, store_grant;
  logic [15:0] load_beats, store_beats;
  tinynpu_port_arbiter u_port (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .load_req_i   (load_req),
    .load_beats_i (load_beats),
    .store_req_i  (store_req),
    .store_beats_i(store_beats),
    .load_grant_o (load_grant),
    .store_grant_o(store_grant)
  );

  // ---- scratchpads -----------------------------------------------------------
  logic              ld_wr_valid;
  logic [1:0]        ld_wr_scope;
  // Rows are 14-bit ISA fields; the dispatcher checked them against each scratchpad, so high bits are 0.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [13:0]       ld_wr_row;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [RowW-1:0]   ld_wr_data;
  logic [ABits-TBits-1:0] a_tile;
  logic [BBits-TBits-1:0] b_tile;
  logic [TNPU_TILE*InRowW-1:0] a_tile_data, b_tile_data;

  tinynpu_spad_in #(.ROWS(TNPU_A_REG_ROWS), .TILE(TNPU_TILE), .ELEM_W(TNPU_INPUT_BITS)) u_spad_a (
    .clk_i  (clk_i),
    .we_i   (ld_wr_valid && ld_wr_scope == 2'(TNPU_SCOPE_A)),
    .waddr_i(ld_wr_row[ABits-1:0]),
    .wdata_i(ld_wr_data[InRowW-1:0]),
    .rtile_i(a_tile),
    .rdata_o(a_tile_data)
  );
  tinynpu_spad_in #(.ROWS(TNPU_B_REG_ROWS), .TILE(TNPU_TILE), .ELEM_W(TNPU_INPUT_BITS)) u_spad_b (
    .clk_i  (clk_i),
    .we_i   (ld_wr_valid && ld_wr_scope == 2'(TNPU_SCOPE_B)),
    .waddr_i(ld_wr_row[BBits-1:0]),
    .wdata_i(ld_wr_data[InRowW-1:0]),
    .rtile_i(b_tile),
    .rdata_o(b_tile_data)
  );

  logic               t_we, alu_we;
  logic [AccBits-1:0] t_raddr, t_waddr, alu_rdst, alu_rsrc, alu_waddr;
  // Rows are 14-bit ISA fields; the dispatcher checked them against the accumulator size.
  /* verilator lint_off UNUSEDSIGNAL */
  logic [13:0]        st_raddr;
  /* verilator lint_on UNUSEDSIGNAL */
  logic [RowW-1:0]    t_rdata, t_wdata, alu_dst_data, alu_src_data, alu_wdata, st_rdata;
  tinynpu_spad_acc #(.ROWS(TNPU_ACC_ROWS), .ROW_W(RowW)) u_spad_acc (
    .clk_i          (clk_i),
    .load_we_i      (ld_wr_valid && ld_wr_scope == 2'(TNPU_SCOPE_ACC)),
    .load_waddr_i   (ld_wr_row[AccBits-1:0]),
    .load_wdata_i   (ld_wr_data),
    .tensor_we_i    (t_we),
    .tensor_waddr_i (t_waddr),
    .tensor_wdata_i (t_wdata),
    .alu_we_i       (alu_we),
    .alu_waddr_i    (alu_waddr),
    .alu_wdata_i    (alu_wdata),
    .tensor_raddr_i (t_raddr),
    .tensor_rdata_o (t_rdata),
    .alu_raddr_dst_i(alu_rdst),
    .alu_rdata_dst_o(alu_dst_data),
    .alu_raddr_src_i(alu_rsrc),
    .alu_rdata_src_o(alu_src_data),
    .store_raddr_i  (st_raddr[AccBits-1:0]),
    .store_rdata_o  (st_rdata)
  );

  // ---- units ---------------------------------------------------------------
  tinynpu_load_unit #(.IDX_W(IDX_W), .TAG_W(TagW), .ROW_W(RowW)) u_load (
    .clk_i          (clk_i),
    .rst_ni         (rst_ni),
    .q_valid_i      (q_valid[TNPU_UNIT_LOAD]),
    .q_data_i       (q_head[TNPU_UNIT_LOAD]),
    .q_pop_o        (q_pop[TNPU_UNIT_LOAD]),
    .tok_avail_i    (avail[TNPU_UNIT_LOAD*4 +: 4]),
    .consume_o      (consume[TNPU_UNIT_LOAD]),
    .port_req_o     (load_req),
    .port_beats_o   (load_beats),
    .port_grant_i   (load_grant),
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
    .comp_idx_o     (comp_idx_o[TNPU_UNIT_LOAD*IDX_W +: IDX_W]),
    .start_o        (start_o[TNPU_UNIT_LOAD]),
    .start_idx_o    (start_idx_o[TNPU_UNIT_LOAD*IDX_W +: IDX_W]),
    .stall_err_o    (load_stall)
  );

  tinynpu_tensor_unit #(
    .IDX_W       (IDX_W),
    .A_TILE_BITS (ABits - TBits),
    .B_TILE_BITS (BBits - TBits),
    .ACC_ROW_BITS(AccBits),
    .TileBits    (TNPU_TILE * InRowW),
    .AccRowBits  (RowW)
  ) u_tensor (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .q_valid_i    (q_valid[TNPU_UNIT_TENSOR]),
    .q_data_i     (q_head[TNPU_UNIT_TENSOR]),
    .q_pop_o      (q_pop[TNPU_UNIT_TENSOR]),
    .tok_avail_i  (avail[TNPU_UNIT_TENSOR*4 +: 4]),
    .consume_o    (consume[TNPU_UNIT_TENSOR]),
    .a_tile_o     (a_tile),
    .a_tile_data_i(a_tile_data),
    .b_tile_o     (b_tile),
    .b_tile_data_i(b_tile_data),
    .acc_raddr_o  (t_raddr),
    .acc_rdata_i  (t_rdata),
    .acc_we_o     (t_we),
    .acc_waddr_o  (t_waddr),
    .acc_wdata_o  (t_wdata),
    .comp_o       (comp_o[TNPU_UNIT_TENSOR]),
    .comp_signal_o(comp_signal[TNPU_UNIT_TENSOR]),
    .comp_idx_o   (comp_idx_o[TNPU_UNIT_TENSOR*IDX_W +: IDX_W]),
    .start_o      (start_o[TNPU_UNIT_TENSOR]),
    .start_idx_o  (start_idx_o[TNPU_UNIT_TENSOR*IDX_W +: IDX_W])
  );

  tinynpu_alu_unit #(.IDX_W(IDX_W), .ACC_ROW_BITS(AccBits), .ROW_W(RowW)) u_alu (
    .clk_i        (clk_i),
    .rst_ni       (rst_ni),
    .q_valid_i    (q_valid[TNPU_UNIT_ALU]),
    .q_data_i     (q_head[TNPU_UNIT_ALU]),
    .q_pop_o      (q_pop[TNPU_UNIT_ALU]),
    .tok_avail_i  (avail[TNPU_UNIT_ALU*4 +: 4]),
    .consume_o    (consume[TNPU_UNIT_ALU]),
    .raddr_dst_o  (alu_rdst),
    .rdata_dst_i  (alu_dst_data),
    .raddr_src_o  (alu_rsrc),
    .rdata_src_i  (alu_src_data),
    .we_o         (alu_we),
    .waddr_o      (alu_waddr),
    .wdata_o      (alu_wdata),
    .comp_o       (comp_o[TNPU_UNIT_ALU]),
    .comp_signal_o(comp_signal[TNPU_UNIT_ALU]),
    .comp_idx_o   (comp_idx_o[TNPU_UNIT_ALU*IDX_W +: IDX_W]),
    .start_o      (start_o[TNPU_UNIT_ALU]),
    .start_idx_o  (start_idx_o[TNPU_UNIT_ALU*IDX_W +: IDX_W])
  );

  tinynpu_store_unit #(.IDX_W(IDX_W), .WTAG_W(WTagW), .ROW_W(RowW)) u_store (
    .clk_i         (clk_i),
    .rst_ni        (rst_ni),
    .q_valid_i     (q_valid[TNPU_UNIT_STORE]),
    .q_data_i      (q_head[TNPU_UNIT_STORE]),
    .q_pop_o       (q_pop[TNPU_UNIT_STORE]),
    .tok_avail_i   (avail[TNPU_UNIT_STORE*4 +: 4]),
    .consume_o     (consume[TNPU_UNIT_STORE]),
    .port_req_o    (store_req),
    .port_beats_o  (store_beats),
    .port_grant_i  (store_grant),
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
    .comp_idx_o    (comp_idx_o[TNPU_UNIT_STORE*IDX_W +: IDX_W]),
    .start_o       (start_o[TNPU_UNIT_STORE]),
    .start_idx_o   (start_idx_o[TNPU_UNIT_STORE*IDX_W +: IDX_W]),
    .stall_err_o   (store_stall)
  );
endmodule

`default_nettype wire
