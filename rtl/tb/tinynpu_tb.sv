// Co-simulation wrapper: clock, the accelerator, and the instruction trace
// (dispatch, start and end cycle of every instruction, indexed by its
// position in the program) kept in arrays the cocotb bench reads back.
// DRAM and all other inputs are driven from Python (rtl/tb/tinynpu_cocotb.py).
`timescale 1ns / 1ps
`default_nettype none

module tinynpu_tb #(
  parameter int IMEM_AW = 14,
  parameter int IDX_W   = 16
);
  `include "tinynpu_isa.vh"
  localparam int TagW  = IDX_W + 26;
  localparam int WTagW = IDX_W + 5;

  logic clk = 1'b0;
  always #5 clk = ~clk;  // rising edges at 5 + 10k ns: edge k ends absolute cycle k

  logic               rst_n;
  logic               imem_we;
  logic [IMEM_AW-1:0] imem_waddr;
  logic [127:0]       imem_wdata;
  logic [IMEM_AW:0]   prog_len;
  logic               start;
  logic               busy, done, error;
  logic [3:0]         error_cause;
  logic [IDX_W-1:0]   error_pc;
  logic [31:0]        cycles;
  logic               rd_req_valid, rd_req_ready, rd_resp_valid;
  logic [31:0]        rd_req_addr;
  logic [6:0]         rd_req_bytes;
  logic [TagW-1:0]    rd_req_tag, rd_resp_tag;
  logic [511:0]       rd_resp_data;
  logic               wr_req_valid, wr_req_ready, wr_ack_valid;
  logic [31:0]        wr_req_addr;
  logic [6:0]         wr_req_bytes;
  logic [511:0]       wr_req_data;
  logic [WTagW-1:0]   wr_req_tag, wr_ack_tag;
  logic               disp;
  logic [IDX_W-1:0]   disp_idx;
  logic [3:0]         start_v, comp_v;
  logic [4*IDX_W-1:0] start_idx, comp_idx;
  logic               finished;
  assign finished = done || error;

  tinynpu_top #(.IMEM_AW(IMEM_AW), .IDX_W(IDX_W)) u_top (
    .clk_i          (clk),
    .rst_ni         (rst_n),
    .imem_we_i      (imem_we),
    .imem_waddr_i   (imem_waddr),
    .imem_wdata_i   (imem_wdata),
    .prog_len_i     (prog_len),
    .start_i        (start),
    .busy_o         (busy),
    .done_o         (done),
    .error_o        (error),
    .error_cause_o  (error_cause),
    .error_pc_o     (error_pc),
    .cycles_o       (cycles),
    .rd_req_valid_o (rd_req_valid),
    .rd_req_ready_i (rd_req_ready),
    .rd_req_addr_o  (rd_req_addr),
    .rd_req_bytes_o (rd_req_bytes),
    .rd_req_tag_o   (rd_req_tag),
    .rd_resp_valid_i(rd_resp_valid),
    .rd_resp_data_i (rd_resp_data),
    .rd_resp_tag_i  (rd_resp_tag),
    .wr_req_valid_o (wr_req_valid),
    .wr_req_ready_i (wr_req_ready),
    .wr_req_addr_o  (wr_req_addr),
    .wr_req_bytes_o (wr_req_bytes),
    .wr_req_data_o  (wr_req_data),
    .wr_req_tag_o   (wr_req_tag),
    .wr_ack_valid_i (wr_ack_valid),
    .wr_ack_tag_i   (wr_ack_tag),
    .disp_o         (disp),
    .disp_idx_o     (disp_idx),
    .start_o        (start_v),
    .start_idx_o    (start_idx),
    .comp_o         (comp_v),
    .comp_idx_o     (comp_idx)
  );

  // Trace, in cycles of the run (cycle 0 = first dispatch).  end = e, the
  // first cycle the instruction's results and tokens are usable.
  logic [31:0] disp_q  [0:(1 << IMEM_AW) - 1];
  logic [31:0] start_q [0:(1 << IMEM_AW) - 1];
  logic [31:0] end_q   [0:(1 << IMEM_AW) - 1];
  always @(posedge clk) begin
    if (disp) disp_q[disp_idx] <= cycles;
    for (int u = 0; u < 4; u++) begin
      if (start_v[u]) start_q[start_idx[u*IDX_W +: IDX_W]] <= cycles;
      if (comp_v[u]) end_q[comp_idx[u*IDX_W +: IDX_W]] <= cycles + 1;
    end
  end

  // Between programs of one simulation the bench clears the scratchpads (as
  // at power-up, and as the simulator starts): a zero-time, bench-only write
  // through hierarchical references, not a feature of the RTL.
  logic clear_spads = 1'b0;
  always @(posedge clear_spads) begin
    for (int i = 0; i < $size(u_top.u_spad_acc.mem_q); i++) u_top.u_spad_acc.mem_q[i] = '0;
  end
  for (genvar b = 0; b < TNPU_TILE; b++) begin : g_clear
    always @(posedge clear_spads) begin
      for (int i = 0; i < $size(u_top.u_spad_a.g_bank[b].mem_q); i++) begin
        u_top.u_spad_a.g_bank[b].mem_q[i] = '0;
        u_top.u_spad_b.g_bank[b].mem_q[i] = '0;
      end
    end
  end
endmodule

`default_nettype wire
