// Co-simulation bench: clock, the accelerator, DRAM as a memory of the
// bench, and the instruction trace (dispatch, start and end cycle of every
// instruction, indexed by its position in the program).
//
// Everything per cycle happens here, in SystemVerilog: the cocotb side
// (rtl/tb/tinynpu_cocotb.py) only starts job n and waits for it.  Job n is
// described by files in the directory named by +tinynpu_job_dir=DIR, written
// by tinynpu.rtl.cosim:
//   pN.job        "prog_len max_cycles image_lo image_hi n_regions", then one
//                 "lo hi" line per region to read back (DRAM word indices)
//   pN.imem.hex   the program, one 128-bit word per line
//   pN.dram.hex   the DRAM image ($readmemh with @word addresses)
// and the bench answers with
//   pN.result     "cycles done error cause error_pc timed_out late bad"
//   pN.trace.hex  one line per instruction: dispatch, start, end (32 bits
//                 each, all ones where the RTL never recorded the cycle)
//   pN.rK.hex     DRAM words lo..hi of region K.
//
// The DRAM answers one request per DMA row: a request seen at clock edge k
// gets its response (read data or write acknowledgement) sampled by the RTL
// at edge k + beats + latency - 2, beats = ceil(bytes / bytes_per_cycle)
// (see rtl/tinynpu_top.sv).  A response due before the edge it can be driven
// in counts as late, a request outside DRAM as bad: both are bench faults the
// comparison reports.
`timescale 1ns / 1ps
`default_nettype none

// Lint waivers for this simulation-only bench (the RTL's few are beside the signals they concern):
// BLKSEQ: the DRAM model and the trace update their own state in program order within one edge;
// PROCASSINIT: declarations carry the power-up state the first job starts from;
// WIDTHEXPAND, WIDTHTRUNC: addresses and cycles are longint arithmetic indexing narrower arrays;
// UNUSEDSIGNAL: busy_o and the index bits above the instruction memory are not part of the bench's checks.
/* verilator lint_off BLKSEQ */
/* verilator lint_off PROCASSINIT */
/* verilator lint_off WIDTHEXPAND */
/* verilator lint_off WIDTHTRUNC */
/* verilator lint_off UNUSEDSIGNAL */
`include "tinynpu_isa.vh"
module tinynpu_tb import tinynpu_isa_pkg::*; #(
  parameter int IMEM_AW = 16,
  parameter int IDX_W   = 16
);
  // The widths of tinynpu_top's ports (see there).
  localparam int N         = TNPU_NUM_QUEUED_UNITS;
  localparam int TagW      = IDX_W + 1 + TNPU_SIGNAL_W + TNPU_LOAD_SCOPE_W + TNPU_LOAD_SP_ROW_W + TNPU_LOAD_COLS_W;
  localparam int WTagW     = IDX_W + 1 + TNPU_SIGNAL_W;
  localparam int RowBytes  = TNPU_ROW_BYTES_MAX;
  localparam int RowW      = 8 * RowBytes;
  localparam int DramWords = TNPU_DRAM_BYTES / RowBytes;
  localparam int ImemWords = 1 << IMEM_AW;
  localparam int InFlight  = 1024;  // responses pending at once (more than latency + beats ever needs)
  localparam int PtrW      = $clog2(InFlight);

  logic clk = 1'b0;
  always #5 clk = ~clk;  // rising edges at 5 + 10k ns

  logic               rst_n = 1'b0;
  logic               imem_we = 1'b0;
  logic [IMEM_AW-1:0] imem_waddr = '0;
  logic [TNPU_WORD_BITS-1:0] imem_wdata = '0;
  logic [IMEM_AW:0]   prog_len = '0;
  logic               start = 1'b0;
  logic               busy, done, error;
  logic [3:0]         error_cause;
  logic [IDX_W-1:0]   error_pc;
  logic [TNPU_CYCLE_BITS-1:0] cycles;
  logic               rd_req_valid;
  logic               rd_resp_valid = 1'b0;
  logic [TNPU_LOAD_DRAM_W-1:0] rd_req_addr;
  logic [TNPU_ROW_BYTES_BITS-1:0] rd_req_bytes;
  logic [TagW-1:0]    rd_req_tag, rd_resp_tag;
  logic [RowW-1:0]    rd_resp_data;
  logic               wr_req_valid;
  logic               wr_ack_valid = 1'b0;
  logic [TNPU_STORE_DRAM_W-1:0] wr_req_addr;
  logic [TNPU_ROW_BYTES_BITS-1:0] wr_req_bytes;
  logic [RowW-1:0]    wr_req_data;
  logic [WTagW-1:0]   wr_req_tag, wr_ack_tag;
  logic               disp;
  logic [IDX_W-1:0]   disp_idx;
  logic [N-1:0]       start_v, comp_v;
  logic [N*IDX_W-1:0] start_idx, comp_idx;
  logic               finished;
  assign finished = done || error;

  tinynpu_top #(.ImemAw(IMEM_AW), .IdxW(IDX_W)) u_top (
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
    .rd_req_ready_i (1'b1),
    .rd_req_addr_o  (rd_req_addr),
    .rd_req_bytes_o (rd_req_bytes),
    .rd_req_tag_o   (rd_req_tag),
    .rd_resp_valid_i(rd_resp_valid),
    .rd_resp_data_i (rd_resp_data),
    .rd_resp_tag_i  (rd_resp_tag),
    .wr_req_valid_o (wr_req_valid),
    .wr_req_ready_i (1'b1),
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

  // ---- job control (cocotb writes job_id and raises job_go) --------------------------------------
  // (public_flat_rw: Verilator keeps only these visible to cocotb, and optimizes everything else.)
  int   job_id /*verilator public_flat_rw*/ = 0;
  logic job_go /*verilator public_flat_rw*/ = 1'b0;
  logic job_running /*verilator public_flat_rw*/ = 1'b0;   // the program has started
  logic job_finished /*verilator public_flat_rw*/ = 1'b0;  // done, error or cycle limit
  logic job_done /*verilator public_flat_rw*/ = 1'b0;      // results written
  string job_dir;
  initial if (!$value$plusargs("tinynpu_job_dir=%s", job_dir)) job_dir = ".";

  function automatic string job_file(input string suffix);
    return $sformatf("%s/p%0d.%s", job_dir, job_id, suffix);
  endfunction

  // Set at a falling edge by the job task, acted on by the DRAM and trace processes at the next rising edge.
  logic   load_image = 1'b0;
  longint image_lo = 0, image_hi = -1;
  logic   clear_spads = 1'b0;

  // ---- DRAM: 64-byte words, rows at any byte address ---------------------------------------------
  bit [RowW-1:0] dram_q [DramWords];
  longint dirty_lo = 0, dirty_hi = -1;  // words written since the last clear
  longint edge_k = 0;                   // index of the current rising edge
  int     late = 0, bad = 0;

  function automatic logic [RowW-1:0] byte_mask(input int nbytes);
    return nbytes >= RowBytes ? '1 : (RowW'(1) << (8 * nbytes)) - RowW'(1);
  endfunction

  function automatic logic [RowW-1:0] dram_read(input longint addr, input int nbytes);
    longint w = addr / RowBytes;
    logic [2*RowW-1:0] pair;
    pair[RowW-1:0] = dram_q[w];
    pair[2*RowW-1:RowW] = w + 1 < DramWords ? dram_q[w+1] : '0;
    pair = pair >> (8 * (addr % RowBytes));
    return pair[RowW-1:0] & byte_mask(nbytes);
  endfunction

  task automatic dram_write(input longint addr, input int nbytes, input logic [RowW-1:0] data);
    longint w = addr / RowBytes;
    int shift = 8 * int'(addr % RowBytes);
    logic [2*RowW-1:0] mask = {{RowW{1'b0}}, byte_mask(nbytes)} << shift;
    logic [2*RowW-1:0] bits = {{RowW{1'b0}}, data & byte_mask(nbytes)} << shift;
    dram_q[w] = (dram_q[w] & ~mask[RowW-1:0]) | bits[RowW-1:0];
    if (mask[2*RowW-1:RowW] != '0) dram_q[w+1] = (dram_q[w+1] & ~mask[2*RowW-1:RowW]) | bits[2*RowW-1:RowW];
    if (w < dirty_lo) dirty_lo = w;
    if (w + 1 > dirty_hi) dirty_hi = w + 1 < DramWords ? w + 1 : w;
  endtask

  function automatic bit in_dram(input longint addr, input int nbytes);
    return nbytes >= 1 && nbytes <= RowBytes && addr + nbytes <= TNPU_DRAM_BYTES;
  endfunction

  function automatic longint due_edge(input int nbytes);
    return edge_k + (nbytes + TNPU_DRAM_BYTES_PER_CYCLE - 1) / TNPU_DRAM_BYTES_PER_CYCLE + TNPU_DRAM_LATENCY - 2;
  endfunction

  // In-order response queues (circular buffers).
  longint        rd_due [InFlight];
  logic [TagW-1:0] rd_tag [InFlight];
  logic [RowW-1:0] rd_data [InFlight];
  logic [PtrW:0] rd_head = '0, rd_tail = '0;
  longint        wr_due [InFlight];
  logic [WTagW-1:0] wr_tag [InFlight];
  logic [PtrW:0] wr_head = '0, wr_tail = '0;

  always @(posedge clk) begin : dram_model
    edge_k = edge_k + 1;
    if (load_image) begin
      // Before each program: DRAM as the simulator starts it, zero but for the job's image.
      for (longint w = dirty_lo; w <= dirty_hi; w++) dram_q[w] = '0;
      if (image_hi >= image_lo) $readmemh(job_file("dram.hex"), dram_q);
      dirty_lo = image_hi >= image_lo ? image_lo : DramWords;
      dirty_hi = image_hi;
      rd_head = '0; rd_tail = '0; wr_head = '0; wr_tail = '0;
      late = 0; bad = 0;
      rd_resp_valid <= 1'b0;
      wr_ack_valid <= 1'b0;
    end else begin
      if (rd_req_valid) begin
        if (!in_dram(longint'(rd_req_addr), int'(rd_req_bytes))) bad++;
        else if (rd_tail - rd_head == (PtrW + 1)'(InFlight)) bad++;
        else begin
          rd_due[rd_tail[PtrW-1:0]] = due_edge(int'(rd_req_bytes));
          rd_tag[rd_tail[PtrW-1:0]] = rd_req_tag;
          rd_data[rd_tail[PtrW-1:0]] = dram_read(longint'(rd_req_addr), int'(rd_req_bytes));
          rd_tail++;
        end
      end
      if (wr_req_valid) begin
        if (!in_dram(longint'(wr_req_addr), int'(wr_req_bytes))) bad++;
        else if (wr_tail - wr_head == (PtrW + 1)'(InFlight)) bad++;
        else begin
          dram_write(longint'(wr_req_addr), int'(wr_req_bytes), wr_req_data);
          wr_due[wr_tail[PtrW-1:0]] = due_edge(int'(wr_req_bytes));
          wr_tag[wr_tail[PtrW-1:0]] = wr_req_tag;
          wr_tail++;
        end
      end
      // Drive the head response now if it is due at the next edge (late ones go out at once).
      if (rd_head != rd_tail && rd_due[rd_head[PtrW-1:0]] <= edge_k + 1) begin
        if (rd_due[rd_head[PtrW-1:0]] < edge_k + 1) late++;
        rd_resp_valid <= 1'b1;
        rd_resp_tag <= rd_tag[rd_head[PtrW-1:0]];
        rd_resp_data <= rd_data[rd_head[PtrW-1:0]];
        rd_head++;
      end else begin
        rd_resp_valid <= 1'b0;
      end
      if (wr_head != wr_tail && wr_due[wr_head[PtrW-1:0]] <= edge_k + 1) begin
        if (wr_due[wr_head[PtrW-1:0]] < edge_k + 1) late++;
        wr_ack_valid <= 1'b1;
        wr_ack_tag <= wr_tag[wr_head[PtrW-1:0]];
        wr_head++;
      end else begin
        wr_ack_valid <= 1'b0;
      end
    end
  end

  // ---- trace, in cycles of the run (cycle 0 = first dispatch) -------------------------------------
  // end = e, the first cycle the instruction's results and tokens are usable.
  logic [95:0] trace_q [ImemWords];  // {dispatch, start, end}
  always @(posedge clk) begin : trace
    if (load_image) begin
      for (int i = 0; i < int'(prog_len); i++) trace_q[i] = '1;
    end else begin
      if (disp) trace_q[disp_idx][95:64] = cycles;
      for (int u = 0; u < N; u++) begin
        if (start_v[u]) trace_q[start_idx[u*IDX_W +: IDX_W]][63:32] = cycles;
        if (comp_v[u]) trace_q[comp_idx[u*IDX_W +: IDX_W]][31:0] = cycles + 1;
      end
    end
  end

  // ---- one job ----------------------------------------------------------------------------------
  logic [TNPU_WORD_BITS-1:0] words_q [ImemWords];
  longint       run_cycles = 0;
  longint       max_cycles = 0;
  logic         timed_out = 1'b0;
  always @(posedge clk) begin : limit
    if (start) begin
      run_cycles <= 0;
      timed_out <= 1'b0;
    end else if (job_running && !job_finished) begin
      run_cycles <= run_cycles + 1;
      if (run_cycles + 1 >= max_cycles + 2) timed_out <= 1'b1;
    end
  end

  localparam int MaxRegions = 256;
  longint region_lo [MaxRegions];
  longint region_hi [MaxRegions];
  task automatic run_job;
    int fd, n_regions, len;
    fd = $fopen(job_file("job"), "r");
    if (fd == 0) $fatal(1, "tinynpu_tb: cannot open %s", job_file("job"));
    if ($fscanf(fd, "%d %d %d %d %d", len, max_cycles, image_lo, image_hi, n_regions) != 5)
      $fatal(1, "tinynpu_tb: bad header in %s", job_file("job"));
    if (n_regions > MaxRegions) $fatal(1, "tinynpu_tb: more than %0d regions in %s", MaxRegions, job_file("job"));
    for (int r = 0; r < n_regions; r++) begin
      if ($fscanf(fd, "%d %d", region_lo[r], region_hi[r]) != 2)
        $fatal(1, "tinynpu_tb: bad region %0d in %s", r, job_file("job"));
    end
    $fclose(fd);
    if (len > 0) $readmemh(job_file("imem.hex"), words_q, 0, len - 1);

    // Reset with the scratchpads cleared, the image loaded, then the program through the write port.
    @(negedge clk);
    rst_n = 1'b0;
    clear_spads = 1'b1;
    start = 1'b0;
    imem_we = 1'b0;
    prog_len = (IMEM_AW + 1)'(len);
    load_image = 1'b1;
    @(negedge clk);
    load_image = 1'b0;
    @(negedge clk);
    rst_n = 1'b1;
    clear_spads = 1'b0;
    for (int i = 0; i < len; i++) begin
      imem_we = 1'b1;
      imem_waddr = IMEM_AW'(i);
      imem_wdata = words_q[i];
      @(negedge clk);
    end
    imem_we = 1'b0;
    start = 1'b1;
    @(negedge clk);
    start = 1'b0;
    job_running = 1'b1;
    wait (finished || timed_out);
    job_finished = 1'b1;
    // One more edge so the last completion is in the trace.
    @(posedge clk);
    @(negedge clk);

    $writememh(job_file("trace.hex"), trace_q, 0, len > 0 ? len - 1 : 0);
    for (int r = 0; r < n_regions; r++) $writememh(job_file($sformatf("r%0d.hex", r)), dram_q, region_lo[r], region_hi[r]);
    fd = $fopen(job_file("result"), "w");
    $fdisplay(fd, "%0d %0d %0d %0d %0d %0d %0d %0d", cycles, done, error, error_cause, error_pc, timed_out,
              late, bad);
    $fclose(fd);
    job_running = 1'b0;
    job_finished = 1'b0;
  endtask

  always begin : jobs
    @(posedge job_go);
    run_job();
    job_done = 1'b1;
    wait (!job_go);
    job_done = 1'b0;
  end

  // Between programs of one simulation the bench clears the scratchpads (as
  // at power-up, and as the simulator starts): a zero-time, bench-only write
  // through hierarchical references, not a feature of the RTL.
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
/* verilator lint_on UNUSEDSIGNAL */
/* verilator lint_on WIDTHTRUNC */
/* verilator lint_on WIDTHEXPAND */
/* verilator lint_on PROCASSINIT */
/* verilator lint_on BLKSEQ */

`default_nettype wire
