/* The simulator's native core: the scheduler of timing.py, the integer
 * semantics of semantics.py and the race sanitizer of hazards.py, in C.
 *
 * It exists for speed only (13-48x the Python core end to end on the
 * benchmark workloads: `tinynpu bench sim`); the Python modules are the reference and this file follows them statement by
 * statement, so that both cores give identical timelines, stalls, values and
 * faults (tests/test_sim_native.py runs both on the same programs and
 * compares everything).  Read timing.py first: the comments here only say
 * where the C differs in form.
 *
 * Python prepares everything static (decoded columns, timing classes, which
 * units use which resource) and formats every fault message; this file only
 * reports a fault's kind and its numbers in `Run.fault`/`Run.fault_args`.
 *
 * Built by native.py with the machine's C compiler (GCC or Clang: it uses unsigned __int128 and, where
 * the CPU has them, AVX-512 VNNI intrinsics; see tmm_append).
 */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if FLT_EVAL_METHOD != 0
#error "vrequantf needs binary32 arithmetic without wider intermediates (FLT_EVAL_METHOD 0)"
#endif

#define MAX_UNITS 8       /* queued units (ids 0..nq-1) */
#define MAX_OPS 64        /* opcode indices */
#define MAX_OPERANDS 8    /* Isa.max_operands at most */
#define MAX_RES 9         /* scratchpad scopes plus DRAM */
#define PRUNE_AT 16       /* hazards._PRUNE_AT */

/* Fault kinds; native.py turns each into the Python core's message. */
enum Fault {
  F_NONE, F_OVERFLOW, F_LIMIT_START, F_LIMIT_HALT, F_LIMIT_DISPATCH, F_NEVER_HALTS, F_DEADLOCK,
  F_NO_PROGRESS, F_RACE, F_NO_MEMORY
};

/* Everything one run needs and reports; mirrored field for field by native.py's ctypes Structure. */
typedef struct {
  /* the program: decode.Decoded's columns, n_exec long */
  int64_t n;
  const int16_t *op;
  const int8_t *unit, *wait, *signal;
  const int32_t *occ, *lat, *beats;
  const uint64_t *lo, *hi;
  /* per opcode (= its kind, enum Kind): the timing rule "waits for its unit's previous instruction",
   * operand fields */
  int32_t waits_prev[MAX_OPS];
  int32_t field_lsb[MAX_OPS][MAX_OPERANDS], field_width[MAX_OPS][MAX_OPERANDS];
  int32_t field_signed[MAX_OPS][MAX_OPERANDS];
  /* the config */
  int32_t nq, depth, max_tok, tile;
  int64_t limit;
  uint32_t port_units, free_units; /* bit masks: units using the DRAM port / holding non-port instructions */
  /* the state: DRAM and the scratchpads (row-major, tile elements per row) */
  uint8_t *dram;
  uint8_t *sp[MAX_RES];
  int64_t sp_rows[MAX_RES];
  int32_t elem_bytes[MAX_RES];
  int32_t scope_a, scope_b, scope_acc, n_scopes;
  /* the race sanitizer: on or off, the other users of each resource, instructions left per unit */
  int32_t races;
  uint32_t others[MAX_RES][MAX_UNITS];
  int64_t remaining[MAX_UNITS];
  /* results */
  int32_t wide_times;                 /* 1: the timeline columns are int64, else uint32 */
  void *dispatch, *start, *end;
  int64_t stalls[MAX_UNITS][3];       /* token, in_flight_loads, dram_port */
  int64_t control_stalls[2];          /* barrier (sync, halt), queue_full */
  int64_t cycles, executed;
  int32_t fault;
  int64_t fault_args[6];
} Run;

/* ---- small growable rings -------------------------------------------------------------------------- */

/* A token channel: the FIFO of unconsumed tokens (completion cycle, producer, clock) and the consume
 * starts the overflow rule can still ask about (tokens.TokenLedger, whose signal window is this FIFO). */
typedef struct {
  int64_t *e, *prod, *clock; /* clock: nq entries per token when races are on */
  int64_t cap, head, len;
  int64_t n_sig, n_con;
  int64_t *con_s, con_mask;
} Channel;

/* One access of the race log (hazards._Entry). */
typedef struct {
  int64_t epoch, lo, hi, index, fp[4];
  int32_t write;
} Access;

typedef struct {
  Access *a;
  int64_t cap, head, len, prune_at;
} Log;

/* A run of tmms into the same acc tiles, not yet computed (see tmm_append). */
#define TMM_PARTS 64
typedef struct {
  int64_t a_t, b_t, k, d0; /* d0: its first k in the run's depth */
} TmmPart;

typedef struct {
  int64_t acc_t, m, n, accumulate, depth; /* the run's acc tiles, whether its first tmm accumulates, sum of k */
  int n_parts;
  TmmPart part[TMM_PARTS];
  int64_t lo[MAX_RES], hi[MAX_RES]; /* per scope, the hull of the rows the run reads or writes */
} TmmBatch;

typedef struct {
  Run *R;
  int nq;
  int64_t *pend, pend_head[MAX_UNITS], pend_len[MAX_UNITS], head_ready[MAX_UNITS];
  int64_t *starts, n_disp[MAX_UNITS], n_sched[MAX_UNITS], free_at[MAX_UNITS], last_e[MAX_UNITS];
  Channel chan[MAX_UNITS][MAX_UNITS]; /* chan[v][u]: tokens from v to u */
  int64_t max_e, port_free;
  int64_t clock[MAX_UNITS][MAX_UNITS];
  Log logs[MAX_RES][MAX_UNITS];
  TmmBatch tmm;      /* the pending run of tmms (see tmm_append) */
  uint8_t *aflip;    /* the VNNI kernel's: the a scratchpad with sign bits flipped, tile by tile as read, */
  uint8_t *aflip_ok; /* per tile of a, whether its flipped copy is current (loads and zeros clear it), */
  uint8_t *bpack;    /* the run's B operand, packed, */
  int32_t *colfix;   /* and per packed column vector, 128 * its column sums */
} Sim;

/* RaceChecker.access, defined with the race sanitizer below; the generated header's accesses() calls it. */
static int access(Sim *S, int u, int64_t i, int res, int64_t lo, int64_t hi, int write, const int64_t *fp);

/* enum Kind and accesses(), generated from isa.yaml by isa/gen_c.py. */
#include "generated/tinynpu_core.h"
_Static_assert(N_KINDS <= MAX_OPS, "more instructions than MAX_OPS");

static int fault(Run *R, int kind, int64_t a0, int64_t a1, int64_t a2, int64_t a3, int64_t a4, int64_t a5) {
  R->fault = kind;
  R->fault_args[0] = a0, R->fault_args[1] = a1, R->fault_args[2] = a2;
  R->fault_args[3] = a3, R->fault_args[4] = a4, R->fault_args[5] = a5;
  return kind;
}

static int chan_push(Sim *S, Channel *c, int64_t e, int64_t prod, const int64_t *clock) {
  int nq = S->nq;
  if (c->len == c->cap) {
    int64_t cap = c->cap ? 2 * c->cap : 64;
    int64_t *e2 = malloc(cap * sizeof *e2), *p2 = malloc(cap * sizeof *p2);
    int64_t *k2 = S->R->races ? malloc(cap * nq * sizeof *k2) : NULL;
    if (!e2 || !p2 || (S->R->races && !k2)) {
      free(e2), free(p2), free(k2);
      return 0;
    }
    for (int64_t x = 0; x < c->len; x++) {
      int64_t y = (c->head + x) & (c->cap - 1);
      e2[x] = c->e[y], p2[x] = c->prod[y];
      if (k2) memcpy(k2 + x * nq, c->clock + y * nq, nq * sizeof *k2);
    }
    free(c->e), free(c->prod), free(c->clock);
    c->e = e2, c->prod = p2, c->clock = k2, c->cap = cap, c->head = 0;
  }
  int64_t y = (c->head + c->len) & (c->cap - 1);
  c->e[y] = e, c->prod[y] = prod;
  if (clock) memcpy(c->clock + y * nq, clock, nq * sizeof *clock);
  c->len++;
  return 1;
}

/* The x-th unconsumed token's slot. */
static inline int64_t chan_at(const Channel *c, int64_t x) { return (c->head + x) & (c->cap - 1); }

static Access *log_push(Log *g) {
  if (g->len == g->cap) {
    int64_t cap = g->cap ? 2 * g->cap : 64;
    Access *a2 = malloc(cap * sizeof *a2);
    if (!a2) return NULL;
    for (int64_t x = 0; x < g->len; x++) a2[x] = g->a[(g->head + x) & (g->cap - 1)];
    free(g->a);
    g->a = a2, g->cap = cap, g->head = 0;
  }
  Access *slot = &g->a[(g->head + g->len) & (g->cap - 1)];
  g->len++;
  return slot;
}

static inline Access *log_at(const Log *g, int64_t x) { return &g->a[(g->head + x) & (g->cap - 1)]; }

/* ---- operands ---------------------------------------------------------------------------------------- */

/* decode.Decoded.values for one instruction: its operands in the instruction's operand order. */
static void operands(const Run *R, int64_t i, int op, int64_t *x) {
  unsigned __int128 w = ((unsigned __int128)R->hi[i] << 64) | R->lo[i];
  for (int c = 0; c < MAX_OPERANDS; c++) {
    int width = R->field_width[op][c];
    if (!width) {
      x[c] = 0;
      continue;
    }
    uint64_t raw = (uint64_t)(w >> R->field_lsb[op][c]) & (width == 64 ? ~0ULL : ((1ULL << width) - 1));
    int64_t v = (int64_t)raw;
    if (R->field_signed[op][c] && width < 64 && (raw >> (width - 1) & 1)) v -= (int64_t)1 << width;
    x[c] = v;
  }
}

/* ---- semantics (semantics.State, integer configs) ------------------------------------------------------ */

static inline uint8_t *sp_row(const Run *R, int scope, int64_t row) {
  return R->sp[scope] + row * R->tile * R->elem_bytes[scope];
}

/* Copy one scratchpad row; the common whole rows of 16 to 128 bytes as fixed-size copies the compiler
 * inlines (a library call per 16-byte row was a quarter of a load stream's time). */
static inline void copy_row(uint8_t *dst, const uint8_t *src, int64_t n) {
  switch (n) {
    case 16: memcpy(dst, src, 16); break;
    case 32: memcpy(dst, src, 32); break;
    case 64: memcpy(dst, src, 64); break;
    case 128: memcpy(dst, src, 128); break;
    default: memcpy(dst, src, n); break;
  }
}

/* Rows [lo, hi) of scope were written: a tile of a whose flipped copy (Sim.aflip) they touch is stale. */
static void written(Sim *S, int scope, int64_t lo, int64_t hi) {
  const int64_t T = S->R->tile;
  if (scope == S->R->scope_a && hi > lo) memset(S->aflip_ok + lo / T, 0, (hi - 1) / T - lo / T + 1);
}

static void do_load(Sim *S, const int64_t *x) {
  const Run *R = S->R;
  int scope = (int)x[0];
  int64_t row = x[1], addr = x[2], stride = x[3], rows = x[4], cols = x[5];
  int64_t eb = R->elem_bytes[scope], rb = cols * eb, row_bytes = R->tile * eb;
  uint8_t *dst = sp_row(R, scope, row);
  written(S, scope, row, row + rows);
  for (int64_t r = 0; r < rows; r++, dst += row_bytes) {
    copy_row(dst, R->dram + addr + r * stride, rb);
    if (rb < row_bytes) memset(dst + rb, 0, row_bytes - rb); /* a short row is zero-filled */
  }
}

static void do_zero(Sim *S, const int64_t *x) {
  const Run *R = S->R;
  int scope = (int)x[0];
  written(S, scope, x[1], x[1] + x[2]);
  memset(sp_row(R, scope, x[1]), 0, x[2] * R->tile * R->elem_bytes[scope]);
}

static inline int32_t round_shift(int64_t v, int64_t shift) { return (int32_t)((v + ((1LL << shift) >> 1)) >> shift); }

static void do_store(const Run *R, const int64_t *x) {
  int64_t row = x[0], addr = x[1], stride = x[2], rows = x[3], cols = x[4], narrow = x[5], relu = x[6];
  int64_t shift = x[7];
  const int32_t *acc = (const int32_t *)R->sp[R->scope_acc];
  for (int64_t r = 0; r < rows; r++) { /* row by row: overlapping rows are written in order */
    const int32_t *src = acc + (row + r) * R->tile;
    uint8_t *dst = R->dram + addr + r * stride;
    for (int64_t c = 0; c < cols; c++) {
      if (narrow) {
        int64_t v = ((int64_t)src[c] + ((1LL << shift) >> 1)) >> shift;
        if (relu && v < 0) v = 0;
        dst[c] = (uint8_t)(int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
      } else {
        int32_t v = relu && src[c] < 0 ? 0 : src[c];
        memcpy(dst + 4 * c, &v, 4);
      }
    }
  }
}

/* tmm: acc tile (i, j) (+)= sum over kk of A(i, kk) @ B(j, kk)^T, for every i < m, j < n.
 *
 * Batched.  A tmm's timing comes from the instruction stream alone, so its product need not be formed
 * when it starts, only before anything reads what it writes or writes what it reads.  A run of tmms
 * into the same acc tiles (same acc, m, n; every one after the first accumulating) is one product
 * whose depth is the sum of theirs: acc (+)= [A_1 .. A_p] @ [B_1 .. B_p]^T.  Such a run (the compiler's
 * k-loop) is kept pending in Sim.tmm and computed at once by tmm_flush: the operands are packed once
 * and each output vector stays in a register over the whole depth, so acc is read and written once
 * per run instead of once per tmm (a tmm of the tuned 1024^3 is only 16 deep: acc traffic was half its
 * time).  tmm_flush runs before any other instruction that writes rows the pending tmms read or reads or
 * writes rows they write (tmm_conflicts), before a tmm that does not continue the run, and at the end of
 * every run, faulted or not; so every store, ALU instruction, later load and the final state see the
 * values of executing each tmm when it starts.
 *
 * Addition modulo 2^32 is associative and commutative, so each output element's whole dot product is
 * formed first (in wrapping 32-bit lanes) and added into acc once: the same bits as the reference's
 * tile-by-tile accumulation.  int8 x int8 products summed in int32 lanes are exact (modulo 2^32, which
 * is what acc keeps), so no float rounding argument is needed on any path.
 *
 * Three kernels, chosen when the library is built (native.py builds with -march=native, cached per CPU):
 *
 * - AVX-512 VNNI (tile edges that are multiples of 16): vpdpbusd multiplies 64 unsigned x signed byte
 *   pairs and adds them, four at a time, into 16 int32 lanes: one instruction per 64 multiply-adds, the
 *   machine's integer multiply-add rate.  B is packed (signed) in the operand layout the instruction
 *   wants: for 16 output columns, four consecutive k of each.  A is read from a copy of the a
 *   scratchpad with its sign bits flipped (a ^ 0x80 = a + 128, unsigned; each tile flipped once per
 *   write to it, see tmm_vnni), so four of its bytes are broadcast straight from memory by the
 *   instruction itself; the products are (a + 128) * b, and 128 * (the column sum of B) is subtracted
 *   once per output vector (computed by the same instruction on the packed B).  A register block
 *   of 4 rows x 64 columns (or 8 rows x 16 columns when the output is one tile wide, as the compiler's
 *   are) stays in registers for the whole depth.  Only AVX-512 is used for it: the 256-bit AVX-VNNI
 *   form does half the work per instruction, and the kernels below serve every CPU without AVX-512 VNNI.
 * - Row by row (tmm_portable): each pending tmm in turn, as the reference does, one output row of a tile
 *   row at a time, skipping rows of A that are zero over the whole depth (a batch-1 decode's padding).
 *   A row's dot products run on AVX2 where the CPU has it and the tile edge is a multiple of 16
 *   (tmm_row_avx2: int8 widened to int16, vpmaddwd into int32 lanes kept over the depth), else in
 *   portable C (any CPU and compiler, and tile edges 4 and 8), in uint32 arithmetic, a loop the compiler
 *   vectorizes as far as the target allows.  Defining TINYNPU_PORTABLE forces the portable C (the tests
 *   build the core that way and compare it with the Python core too).
 */

/* Whether instruction (kind, x) touches rows the pending tmms use: it writes rows they read or write,
 * or reads rows they write.  Anything not listed (the ALU, whose rows are all in acc) counts as touching:
 * flushing early is only slower. */
static int tmm_conflicts(const Sim *S, int kind, const int64_t *x) {
  const TmmBatch *t = &S->tmm;
  int scope;
  int64_t lo, hi;
  switch (kind) {
    case K_HALT: case K_SYNC: return 0;
    case K_LOAD: scope = (int)x[0], lo = x[1], hi = x[1] + x[4]; break;
    case K_ZERO: scope = (int)x[0], lo = x[1], hi = x[1] + x[2]; break;
    case K_STORE: scope = S->R->scope_acc, lo = x[0], hi = x[0] + x[3]; break;
    default: return 1;
  }
  return lo < t->hi[scope] && t->lo[scope] < hi;
}

static void tmm_extend(TmmBatch *t, int scope, int64_t lo, int64_t hi) {
  if (lo < t->lo[scope]) t->lo[scope] = lo;
  if (hi > t->hi[scope]) t->hi[scope] = hi;
}

static void tmm_flush(Sim *S);

/* Execute a tmm: add it to the pending run, or flush the run and start another with it. */
static void tmm_append(Sim *S, const int64_t *x) {
  const Run *R = S->R;
  TmmBatch *t = &S->tmm;
  const int64_t T = R->tile, acc_t = x[0], a_t = x[1], b_t = x[2], m = x[3], n = x[4], k = x[5];
  /* a run's packed B fits in a buffer the size of the b scratchpad (one tmm's does) */
  int continues = t->n_parts && t->n_parts < TMM_PARTS && acc_t == t->acc_t && m == t->m && n == t->n && x[6] &&
                  n * (t->depth + k) * T <= R->sp_rows[R->scope_b];
  if (!continues) {
    tmm_flush(S);
    t->acc_t = acc_t, t->m = m, t->n = n, t->accumulate = x[6];
    tmm_extend(t, R->scope_acc, acc_t * T, (acc_t + m * n) * T);
  }
  t->part[t->n_parts++] = (TmmPart){.a_t = a_t, .b_t = b_t, .k = k, .d0 = t->depth};
  t->depth += k;
  tmm_extend(t, R->scope_a, a_t * T, (a_t + m * k) * T);
  tmm_extend(t, R->scope_b, b_t * T, (b_t + n * k) * T);
}

#if defined(__AVX512F__) && defined(__AVX512VNNI__) && !defined(TINYNPU_PORTABLE)
#include <immintrin.h>
#define TMM_VNNI 1
#define VNNI_MAX_R 8 /* output rows per register block */
#define VNNI_MAX_V 4 /* 16-column vectors per register block */

/* One register block: rows [r0, r0 + R) of tile row i, output column vectors [cv, cv + V), over the
 * run's whole depth; R, V are constants after inlining, so acc[][] lives in registers and each
 * broadcast of the flipped A is a memory operand of vpdpbusd. */
static inline __attribute__((always_inline)) void vnni_block(Sim *S, int64_t i, int64_t r0, int64_t cv,
                                                             const int R, const int V) {
  const Run *Rn = S->R;
  const TmmBatch *t = &S->tmm;
  const int64_t T = Rn->tile, G = t->depth * T / 4, per_tile = T / 16;
  __m512i acc[VNNI_MAX_R][VNNI_MAX_V];
  for (int r = 0; r < R; r++)
    for (int v = 0; v < V; v++) acc[r][v] = _mm512_setzero_si512();
  for (int p = 0; p < t->n_parts; p++) {
    const TmmPart *part = &t->part[p];
    for (int64_t kk = 0; kk < part->k; kk++) {
      const uint8_t *a = S->aflip + ((part->a_t + i * part->k + kk) * T + r0) * T;
      const uint8_t *b0 = S->bpack + (part->d0 + kk) * T / 4 * 64;
      for (int64_t g = 0; g < T / 4; g++) {
        __m512i b[VNNI_MAX_V];
        for (int v = 0; v < V; v++) b[v] = _mm512_loadu_si512(b0 + ((cv + v) * G + g) * 64);
        for (int r = 0; r < R; r++) {
          int32_t w;
          memcpy(&w, a + r * T + 4 * g, 4);
          __m512i aw = _mm512_set1_epi32(w);
          for (int v = 0; v < V; v++) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], aw, b[v]);
        }
      }
    }
  }
  int32_t *C = (int32_t *)Rn->sp[Rn->scope_acc];
  for (int v = 0; v < V; v++) {
    int64_t j = (cv + v) / per_tile, c0 = (cv + v) % per_tile * 16;
    __m512i fix = _mm512_loadu_si512(S->colfix + (cv + v) * 16);
    for (int r = 0; r < R; r++) {
      int32_t *out = C + ((t->acc_t + i * t->n + j) * T + r0 + r) * T + c0;
      __m512i sum = _mm512_sub_epi32(acc[r][v], fix);
      if (t->accumulate) sum = _mm512_add_epi32(sum, _mm512_loadu_si512(out));
      _mm512_storeu_si512(out, sum);
    }
  }
}

/* Four rows of 16 bytes, `stride` bytes apart, as one vector. */
static inline __m512i load_4x16(const uint8_t *row, int64_t stride) {
  if (stride == 16) return _mm512_loadu_si512(row);
  __m512i z = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)row));
  z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(row + stride)), 1);
  z = _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(row + 2 * stride)), 2);
  return _mm512_inserti32x4(z, _mm_loadu_si128((const __m128i *)(row + 3 * stride)), 3);
}

/* Pack one B tile (T rows = output columns, T bytes of k each) at group g0 of the run's depth: for each
 * 16 columns, four consecutive k of each column per 64-byte vector.  That is a transpose of 4-byte
 * words, 16 columns x 4 words at a time: each 4 x 4 block of words within a vector, then the vectors'
 * 16-byte lanes. */
static void pack_b_tile(Sim *S, const uint8_t *tile, int64_t col_vector0, int64_t g0, int64_t G) {
  const int64_t T = S->R->tile;
  const __m512i words = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (int64_t c0 = 0; c0 < T; c0 += 16)
    for (int64_t w0 = 0; w0 < T / 4; w0 += 4) {
      __m512i z[4];
      for (int q = 0; q < 4; q++)
        z[q] = _mm512_permutexvar_epi32(words, load_4x16(tile + (c0 + 4 * q) * T + 4 * w0, T));
      __m512i t0 = _mm512_shuffle_i32x4(z[0], z[1], 0x44), t1 = _mm512_shuffle_i32x4(z[0], z[1], 0xEE);
      __m512i t2 = _mm512_shuffle_i32x4(z[2], z[3], 0x44), t3 = _mm512_shuffle_i32x4(z[2], z[3], 0xEE);
      uint8_t *dst = S->bpack + ((col_vector0 + c0 / 16) * G + g0 + w0) * 64;
      _mm512_storeu_si512(dst, _mm512_shuffle_i32x4(t0, t2, 0x88));
      _mm512_storeu_si512(dst + 64, _mm512_shuffle_i32x4(t0, t2, 0xDD));
      _mm512_storeu_si512(dst + 128, _mm512_shuffle_i32x4(t1, t3, 0x88));
      _mm512_storeu_si512(dst + 192, _mm512_shuffle_i32x4(t1, t3, 0xDD));
    }
}

/* The run on AVX-512 VNNI.  A's tiles are read from aflip, the a scratchpad with its sign bits flipped,
 * each tile flipped when a tmm first reads it after it was written (the tuned 1024^3 reads each A tile
 * of a 128-wide block eight times, once per output tile column). */
static void tmm_vnni(Sim *S) {
  const Run *R = S->R;
  const TmmBatch *t = &S->tmm;
  const int64_t T = R->tile, m = t->m, n = t->n, G = t->depth * T / 4, per_tile = T / 16, vectors = n * per_tile;
  const uint8_t *A = R->sp[R->scope_a], *B = R->sp[R->scope_b];
  const __m512i flip = _mm512_set1_epi32((int32_t)0x80808080u);
  for (int p = 0; p < t->n_parts; p++) {
    const TmmPart *part = &t->part[p];
    for (int64_t tile = part->a_t; tile < part->a_t + m * part->k; tile++)
      if (!S->aflip_ok[tile]) {
        for (int64_t q = 0; q < T * T; q += 64)
          _mm512_storeu_si512(S->aflip + tile * T * T + q, _mm512_xor_si512(_mm512_loadu_si512(A + tile * T * T + q), flip));
        S->aflip_ok[tile] = 1;
      }
    for (int64_t j = 0; j < n; j++)
      for (int64_t kk = 0; kk < part->k; kk++)
        pack_b_tile(S, B + (part->b_t + j * part->k + kk) * T * T, j * per_tile, (part->d0 + kk) * T / 4, G);
  }
  for (int64_t cv = 0; cv < vectors; cv++) { /* 128 * column sums of B: the bias the flipped A adds */
    __m512i fix = _mm512_setzero_si512();
    for (int64_t g = 0; g < G; g++)
      fix = _mm512_dpbusd_epi32(fix, flip, _mm512_loadu_si512(S->bpack + (cv * G + g) * 64));
    _mm512_storeu_si512(S->colfix + cv * 16, fix);
  }
  for (int64_t i = 0; i < m; i++) {
    int64_t cv = 0;
    for (; cv + VNNI_MAX_V <= vectors; cv += VNNI_MAX_V)
      for (int64_t r0 = 0; r0 < T; r0 += 4) vnni_block(S, i, r0, cv, 4, VNNI_MAX_V);
    for (; cv < vectors; cv++)
      for (int64_t r0 = 0; r0 < T; r0 += VNNI_MAX_R) vnni_block(S, i, r0, cv, VNNI_MAX_R, 1);
  }
}
#endif

/* Whether row r of every A tile a tmm reads for tile row i (its k tiles from `first`) is all zeros. */
static int a_row_zero(const int8_t *A, int64_t T, int64_t first, int64_t k, int64_t r) {
  int8_t any = 0;
  for (int64_t kk = 0; kk < k; kk++) {
    const int8_t *a = A + ((first + kk) * T + r) * T;
    for (int64_t q = 0; q < T; q++) any |= a[q];
  }
  return !any;
}

/* A tmm's operands (acc, a, b, m, n, k, accumulate) and its scratchpads. */
typedef struct {
  const int8_t *A, *B;
  int32_t *C;
  int64_t T, acc_t, a_t, b_t, m, n, k, accumulate;
} TmmArgs;

/* Output row r of tile row i, every tile column: the dot products of the A row with each B row over the
 * tmm's depth, in uint32 (wrapping as acc does). */
static void tmm_row(const TmmArgs *t, int64_t i, int64_t r) {
  const int64_t T = t->T;
  for (int64_t j = 0; j < t->n; j++)
    for (int64_t c = 0; c < T; c++) {
      uint32_t sum = 0;
      for (int64_t kk = 0; kk < t->k; kk++) {
        const int8_t *a = t->A + ((t->a_t + i * t->k + kk) * T + r) * T;
        const int8_t *b = t->B + ((t->b_t + j * t->k + kk) * T + c) * T;
        for (int64_t q = 0; q < T; q++) sum += (uint32_t)((int32_t)a[q] * b[q]);
      }
      int32_t *out = t->C + ((t->acc_t + i * t->n + j) * T + r) * T + c;
      *out = (int32_t)(t->accumulate ? (uint32_t)*out + sum : sum);
    }
}

#if defined(__AVX2__) && !defined(TINYNPU_PORTABLE)
#include <immintrin.h>
#define TMM_AVX2 1
/* The eight lane sums of s[0..7] as one vector (s[0]'s first), adding modulo 2^32. */
static inline __m256i sum_lanes8(const __m256i *s) {
  __m256i t01 = _mm256_hadd_epi32(s[0], s[1]), t23 = _mm256_hadd_epi32(s[2], s[3]);
  __m256i t45 = _mm256_hadd_epi32(s[4], s[5]), t67 = _mm256_hadd_epi32(s[6], s[7]);
  __m256i lo = _mm256_hadd_epi32(t01, t23), hi = _mm256_hadd_epi32(t45, t67); /* per 128-bit half */
  return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

/* tmm_row on AVX2 (tile edges that are multiples of 16): 16 bytes of the A row and of each B row widened to
 * int16, multiplied and added in pairs into int32 lanes (vpmaddwd: exact, |product pair| <= 2^15), eight
 * output columns' lanes kept in registers over the whole depth and summed once.  The portable loop above
 * reduced every 16 products horizontally: this is about 3x faster on a dense prefill-sized product. */
static void tmm_row_avx2(const TmmArgs *t, int64_t i, int64_t r) {
  const int64_t T = t->T;
  for (int64_t j = 0; j < t->n; j++) {
    int32_t *out = t->C + ((t->acc_t + i * t->n + j) * T + r) * T;
    for (int64_t c0 = 0; c0 < T; c0 += 8) {
      __m256i s[8];
      for (int v = 0; v < 8; v++) s[v] = _mm256_setzero_si256();
      for (int64_t kk = 0; kk < t->k; kk++) {
        const int8_t *a = t->A + ((t->a_t + i * t->k + kk) * T + r) * T;
        const int8_t *b = t->B + ((t->b_t + j * t->k + kk) * T + c0) * T;
        for (int64_t q0 = 0; q0 < T; q0 += 16) {
          __m256i av = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a + q0)));
          for (int v = 0; v < 8; v++) {
            __m256i bv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + v * T + q0)));
            s[v] = _mm256_add_epi32(s[v], _mm256_madd_epi16(av, bv));
          }
        }
      }
      __m256i sum = sum_lanes8(s);
      if (t->accumulate) sum = _mm256_add_epi32(sum, _mm256_loadu_si256((const __m256i *)(out + c0)));
      _mm256_storeu_si256((__m256i *)(out + c0), sum);
    }
  }
}
#endif

/* One tmm (operands acc, a, b, m, n, k, accumulate), as the reference computes it.
 *
 * A row of A that is zero in every tile of the depth contributes nothing: its output rows are set to zero
 * (or, accumulating, left as they are) without multiplying.  A batch-1 matrix-vector product (an LLM's
 * decode step) fills one row of each A tile and zeroes the other T - 1 once, so this skips 15 of every 16
 * row products at T = 16; the values are those of multiplying, bit for bit, and timing never depends on them. */
static void tmm_portable(const Run *R, const int64_t *x) {
  const TmmArgs t = {.A = (const int8_t *)R->sp[R->scope_a], .B = (const int8_t *)R->sp[R->scope_b],
                     .C = (int32_t *)R->sp[R->scope_acc], .T = R->tile, .acc_t = x[0], .a_t = x[1], .b_t = x[2],
                     .m = x[3], .n = x[4], .k = x[5], .accumulate = x[6]};
  const int64_t T = t.T;
  for (int64_t i = 0; i < t.m; i++)
    for (int64_t r = 0; r < T; r++) {
      if (a_row_zero(t.A, T, t.a_t + i * t.k, t.k, r)) {
        if (!t.accumulate)
          for (int64_t j = 0; j < t.n; j++) memset(t.C + ((t.acc_t + i * t.n + j) * T + r) * T, 0, T * sizeof *t.C);
        continue;
      }
#ifdef TMM_AVX2
      if (T % 16 == 0) {
        tmm_row_avx2(&t, i, r);
        continue;
      }
#endif
      tmm_row(&t, i, r);
    }
}

/* Compute the pending run of tmms (see above) and empty it. */
static void tmm_flush(Sim *S) {
  TmmBatch *t = &S->tmm;
  if (!t->n_parts) return;
#ifdef TMM_VNNI
  if (S->R->tile % 16 == 0) tmm_vnni(S);
  else
#endif
    for (int p = 0; p < t->n_parts; p++) {
      const int64_t x[7] = {t->acc_t, t->part[p].a_t, t->part[p].b_t, t->m, t->n, t->part[p].k, p ? 1 : t->accumulate};
      tmm_portable(S->R, x);
    }
  t->n_parts = 0, t->depth = 0;
  for (int s = 0; s < MAX_RES; s++) t->lo[s] = INT64_MAX, t->hi[s] = INT64_MIN;
}

/* Which tmm kernel this build uses (native.py reports it; the tests check the forced fallback). */
const char *tinynpu_tmm_kernel(void) {
#if defined(TMM_VNNI)
  return "avx512-vnni";
#elif defined(TMM_AVX2)
  return "avx2";
#else
  return "portable";
#endif
}

/* semantics.requantize_float (vrequantf): rint(float(float(x) * s)), saturated to int32.  Exact as
 * written: the int32 -> float conversion and the float product each round once to nearest, ties to
 * even (IEEE 754 binary32 in the default rounding mode; FLT_EVAL_METHOD 0, so no wider intermediate;
 * nothing is added to the product, so it cannot be contracted into an FMA); the product is then
 * rounded to an integer from its exact double value, half to even, without libm. */
static inline int32_t requant_float(int32_t x, int32_t bits) {
  float s;
  memcpy(&s, &bits, sizeof s);
  if (x == 0) return 0;                                            /* also 0 * inf */
  if (s != s) s = bits < 0 ? -__builtin_inff() : __builtin_inff(); /* NaN: the infinity of its sign */
  float p = (float)x * s;
  if (p >= 2147483648.0f) return INT32_MAX;
  if (p <= -2147483648.0f) return INT32_MIN;
  double d = p;
  int64_t t = (int64_t)d; /* toward zero; d - t is exact, |d - t| < 1 */
  double f = d - (double)t;
  if (f > 0.5 || (f == 0.5 && (t & 1))) t++;
  else if (f < -0.5 || (f == -0.5 && (t & 1))) t--;
  return (int32_t)t;
}

/* transformer_ops.round_shift: rnd(v, s) = (v + 2^s / 2) >> s for |v| <= 2^62 without overflow (for s >= 2,
 * halving v first cannot move the result: see the Python function), then saturated to int32. */
static inline int32_t round_shift_sat(int64_t v, int64_t s) {
  int64_t r = s < 2 ? (v + s) >> s : ((v >> 1) + ((int64_t)1 << (s - 2))) >> (s - 1);
  return (int32_t)(r < INT32_MIN ? INT32_MIN : r > INT32_MAX ? INT32_MAX : r);
}

/* vredmax / vredsum / vredsq: logical row i's elements are acc rows src + i + j*T, j < n, all T columns
 * but `cols` of the last segment.  The sum of squares needs more than 64 bits (up to 2^81): __int128. */
static void do_reduce(const Run *R, enum Kind kind, const int64_t *x) {
  const int64_t T = R->tile, dst_row = x[0], src = x[1], n = x[2];
  const int has_shift = kind != K_VREDMAX;
  const int64_t shift = has_shift ? x[3] : 0, rows = x[3 + has_shift], cols = x[4 + has_shift];
  int32_t *acc = (int32_t *)R->sp[R->scope_acc];
  for (int64_t i = 0; i < rows; i++) {
    __int128 sum = 0;
    int32_t best = INT32_MIN;
    for (int64_t j = 0; j < n; j++) {
      const int32_t *seg = acc + (src + i + j * T) * T;
      for (int64_t c = 0; c < (j == n - 1 ? cols : T); c++) {
        best = seg[c] > best ? seg[c] : best;
        sum += kind == K_VREDSQ ? (__int128)((int64_t)seg[c] * seg[c]) : (__int128)seg[c];
      }
    }
    int32_t v = best;
    if (has_shift) { /* exact: sum + 2^(shift-1) and the shift in 128 bits, then saturated */
      __int128 r = (sum + (((__int128)1 << shift) >> 1)) >> shift;
      v = (int32_t)(r < INT32_MIN ? INT32_MIN : r > INT32_MAX ? INT32_MAX : r);
    }
    for (int64_t c = 0; c < T; c++) acc[(dst_row + i) * T + c] = v;
  }
}

/* vrecip: min(2^s // x, 2^31 - 1), 2^31 - 1 for x <= 0.  vrsqrt: the largest r < 2^31 with r*r*x <= 4^s, found
 * bit by bit from the top (r*r*x < 2^62 * 2^31: compared in 128 bits), 2^31 - 1 for x <= 0. */
static int32_t recip_rsqrt(enum Kind kind, int32_t x, int64_t s) {
  if (x <= 0) return INT32_MAX;
  if (kind == K_VRECIP) {
    int64_t q = ((int64_t)1 << s) / x;
    return (int32_t)(q > INT32_MAX ? INT32_MAX : q);
  }
  const unsigned __int128 limit = (unsigned __int128)1 << (2 * s);
  int64_t r = 0;
  for (int b = 30; b >= 0; b--) {
    int64_t t = r | ((int64_t)1 << b);
    if ((unsigned __int128)t * (unsigned __int128)t * (unsigned __int128)x <= limit) r = t;
  }
  return (int32_t)r;
}

static void do_alu(const Run *R, enum Kind kind, const int64_t *x) {
  const int64_t T = R->tile;
  int32_t *acc = (int32_t *)R->sp[R->scope_acc];
  int32_t *dst = acc + x[0] * T;
  int64_t count = x[ROWS_OPERAND[kind]] * T; /* every ALU kind has rows (isa/alu_shapes.py) */
  switch (kind) {
    case K_VADD: {
      const int32_t *src = acc + x[1] * T;
      for (int64_t e = 0; e < count; e++) dst[e] = (int32_t)((uint32_t)dst[e] + (uint32_t)src[e]);
      break;
    }
    case K_VADDROW: {
      const int32_t *src = acc + x[1] * T;
      for (int64_t e = 0; e < count; e++) dst[e] = (int32_t)((uint32_t)dst[e] + (uint32_t)src[e % T]);
      break;
    }
    case K_VMAX: {
      int32_t imm = (int32_t)x[1];
      for (int64_t e = 0; e < count; e++) dst[e] = dst[e] > imm ? dst[e] : imm;
      break;
    }
    case K_VMIN: {
      int32_t imm = (int32_t)x[1];
      for (int64_t e = 0; e < count; e++) dst[e] = dst[e] < imm ? dst[e] : imm;
      break;
    }
    case K_VMUL: { /* the low 32 bits of the product */
      uint32_t imm = (uint32_t)(int32_t)x[1];
      for (int64_t e = 0; e < count; e++) dst[e] = (int32_t)((uint32_t)dst[e] * imm);
      break;
    }
    case K_VSHR:
      for (int64_t e = 0; e < count; e++) dst[e] = round_shift(dst[e], x[1]);
      break;
    case K_VREQUANT: { /* semantics.requantize: round(x * M * 2^-(31+S)), exact in 64 bits, saturated */
      const int32_t *mul = acc + x[1] * T, *sh = acc + (x[1] + 1) * T;
      for (int64_t e = 0; e < count; e++) {
        int64_t s = sh[e % T] & 31, y = ((int64_t)dst[e] * mul[e % T] + ((int64_t)1 << (30 + s))) >> (31 + s);
        dst[e] = (int32_t)(y < INT32_MIN ? INT32_MIN : y > INT32_MAX ? INT32_MAX : y);
      }
      break;
    }
    case K_VREQUANTF: {
      const int32_t *scale = acc + x[1] * T;
      for (int64_t e = 0; e < count; e++) dst[e] = requant_float(dst[e], scale[e % T]);
      break;
    }
    case K_VREDMAX: case K_VREDSUM: case K_VREDSQ:
      do_reduce(R, kind, x);
      break;
    case K_VSUBB: { /* block row src + i % T from destination row i, wrapping */
      for (int64_t e = 0; e < count; e++)
        dst[e] = (int32_t)((uint32_t)dst[e] - (uint32_t)acc[(x[1] + (e / T) % T) * T + e % T]);
      break;
    }
    case K_VMULB: { /* exact 64-bit product, rounding shift, saturated */
      for (int64_t e = 0; e < count; e++)
        dst[e] = round_shift_sat((int64_t)dst[e] * acc[(x[1] + (e / T) % T) * T + e % T], x[2]);
      break;
    }
    case K_VLUT: { /* entry e at acc[src * T + e]: the table's rows are consecutive; its low 16 bits, signed */
      const int32_t *table = acc + x[1] * T;
      for (int64_t e = 0; e < count; e++) {
        int64_t idx = (int64_t)dst[e] - x[2];
        dst[e] = (int16_t)(uint16_t)table[idx < 0 ? 0 : idx > 255 ? 255 : idx];
      }
      break;
    }
    case K_VRECIP: case K_VRSQRT: { /* column 0 of each source row, broadcast; src may equal dst: read first */
      for (int64_t i = 0; i < count / T; i++) {
        int32_t r = recip_rsqrt(kind, acc[(x[1] + i) * T], x[2]);
        for (int64_t c = 0; c < T; c++) dst[i * T + c] = r;
      }
      break;
    }
    default: break; /* not an ALU kind: execute() does not send it here */
  }
}

/* Every kind has a case (the build uses -Werror=switch): a new instruction without C semantics does
 * not compile, and `tinynpu isa check` names it. */
static void execute(Sim *S, int kind, const int64_t *x) {
  if (kind != K_TMM && S->tmm.n_parts && tmm_conflicts(S, kind, x)) tmm_flush(S);
  switch ((enum Kind)kind) {
    case K_LOAD: do_load(S, x); break;
    case K_ZERO: do_zero(S, x); break;
    case K_STORE: do_store(S->R, x); break;
    case K_TMM: tmm_append(S, x); break;
    TNPU_ALU_KINDS /* generated from isa.yaml: every instruction of unit alu */
      do_alu(S->R, (enum Kind)kind, x);
      break;
    case K_HALT: case K_SYNC: case N_KINDS: break;
  }
}

/* ---- the race sanitizer (hazards.RaceChecker) ---------------------------------------------------------- */

/* The lowest DRAM byte two 2-D footprints (addr, stride, rows, row_bytes) both touch, or -1. */
static int64_t overlap(const int64_t *f, const int64_t *g) {
  int64_t best = -1;
  for (int64_t r = 0; r < f[2]; r++) {
    int64_t flo = f[0] + r * f[1], fhi = flo + f[3];
    for (int64_t q = 0; q < g[2]; q++) {
      int64_t glo = g[0] + q * g[1], ghi = glo + g[3];
      int64_t lo = flo > glo ? flo : glo;
      if (lo < (fhi < ghi ? fhi : ghi) && (best < 0 || lo < best)) best = lo;
    }
  }
  return best;
}

/* RaceChecker.access; fp is the DRAM footprint (NULL for scratchpad rows).  Returns 0 on a race. */
static int access(Sim *S, int u, int64_t i, int res, int64_t lo, int64_t hi, int write, const int64_t *fp) {
  Run *R = S->R;
  uint32_t others = R->others[res][u];
  if (!others) return 1;
  const int64_t *clock = S->clock[u];
  for (int v = 0; v < S->nq; v++) {
    if (!(others >> v & 1)) continue;
    Log *g = &S->logs[res][v];
    int64_t seen = clock[v];
    if (!g->len || log_at(g, g->len - 1)->epoch <= seen) continue;
    for (int64_t x = g->len - 1; x >= 0; x--) {
      Access *e = log_at(g, x);
      if (e->epoch <= seen) break;
      if ((write || e->write) && lo < e->hi && e->lo < hi) {
        int64_t where = fp ? overlap(fp, e->fp) : (lo > e->lo ? lo : e->lo);
        if (where >= 0) return !fault(R, F_RACE, i, e->index, res, write, e->write, where);
      }
    }
  }
  Log *own = &S->logs[res][u];
  Access *a = log_push(own);
  if (!a) return !fault(R, F_NO_MEMORY, i, 0, 0, 0, 0, 0);
  a->epoch = clock[u], a->lo = lo, a->hi = hi, a->write = write, a->index = i;
  if (fp) memcpy(a->fp, fp, sizeof a->fp);
  if (own->len > own->prune_at) {
    int64_t bound = -1;
    for (int w = 0; w < S->nq; w++)
      if (others >> w & 1 && R->remaining[w] > 0 && (bound < 0 || S->clock[w][u] < bound)) bound = S->clock[w][u];
    if (bound < 0) bound = clock[u];
    while (own->len && log_at(own, 0)->epoch <= bound) own->head = (own->head + 1) & (own->cap - 1), own->len--;
    own->prune_at = 2 * own->len > PRUNE_AT ? 2 * own->len : PRUNE_AT;
  }
  return 1;
}

/* ---- the scheduler (timing.schedule) ------------------------------------------------------------------- */

static inline void set_time(Run *R, void *col, int64_t i, int64_t t) {
  if (R->wide_times) ((int64_t *)col)[i] = t;
  else ((uint32_t *)col)[i] = (uint32_t)t;
}

static inline int64_t head_of(const Sim *S, int u) { return S->pend[u * S->R->depth + S->pend_head[u]]; }

static inline int64_t dispatched_at(const Run *R, int64_t i) {
  return R->wide_times ? ((int64_t *)R->dispatch)[i] : ((uint32_t *)R->dispatch)[i];
}

/* timing.ready: the earliest start of unit u's head ignoring the port, or -1 if a token is missing. */
static int64_t ready(Sim *S, int u) {
  if (S->head_ready[u] >= 0) return S->head_ready[u];
  Run *R = S->R;
  int64_t i = head_of(S, u);
  int64_t t = dispatched_at(R, i) + 1;
  if (S->free_at[u] > t) t = S->free_at[u];
  for (int v = 0; v < S->nq; v++) {
    if (!(R->wait[i] >> v & 1)) continue;
    Channel *c = &S->chan[v][u];
    if (!c->len) return -1;
    if (c->e[c->head] > t) t = c->e[c->head];
  }
  if (R->waits_prev[R->op[i]] && S->last_e[u] > t) t = S->last_e[u];
  return S->head_ready[u] = t;
}

/* timing.start_instr: start unit u's head at cycle s.  Returns 0 on a fault. */
static int start_instr(Sim *S, int u, int64_t s) {
  Run *R = S->R;
  const int nq = S->nq;
  int64_t i = head_of(S, u);
  S->pend_head[u] = (S->pend_head[u] + 1) % R->depth;
  S->pend_len[u]--;
  S->head_ready[u] = -1;
  int op = R->op[i], kind = op;
  int64_t occ = R->occ[i], lat = R->lat[i], beats = R->beats[i], d = dispatched_at(R, i);
  if (R->races) {
    S->clock[u][u]++; /* a new epoch of unit u, as timing.start_instr */
    R->remaining[u]--;
  }
  int64_t base = d + 1 > S->free_at[u] ? d + 1 : S->free_at[u];
  int64_t tok = 0;
  for (int v = 0; v < nq; v++) {
    if (!(R->wait[i] >> v & 1)) continue;
    Channel *c = &S->chan[v][u];
    int64_t y = c->head;
    if (c->e[y] > tok) tok = c->e[y];
    if (R->races)
      for (int w = 0; w < nq; w++)
        if (c->clock[y * nq + w] > S->clock[u][w]) S->clock[u][w] = c->clock[y * nq + w];
    c->head = (c->head + 1) & (c->cap - 1), c->len--;
    int64_t k = c->n_con++; /* TokenLedger.consume */
    c->con_s[k & c->con_mask] = s;
    int64_t j = k + R->max_tok;
    if (j < c->n_sig && c->e[chan_at(c, j - c->n_con)] < s)
      return !fault(R, F_OVERFLOW, v, u, j, c->prod[chan_at(c, j - c->n_con)], 0, 0);
  }
  if (s > base) { /* attribute the wait: tokens first, then loads in flight, then the port */
    int64_t hi = base;
    if (tok > base) S->R->stalls[u][0] += tok - base, hi = tok;
    if (R->waits_prev[op] && S->last_e[u] > hi) R->stalls[u][1] += S->last_e[u] - hi, hi = S->last_e[u];
    if (beats && s > hi) R->stalls[u][2] += s - hi;
  }
  if (beats) S->port_free = s + beats;
  int64_t e = s + lat > S->last_e[u] ? s + lat : S->last_e[u];
  if (e > R->limit) return !fault(R, F_LIMIT_START, i, e, 0, 0, 0, 0);
  S->last_e[u] = e;
  S->free_at[u] = s + occ;
  S->starts[u * R->depth + S->n_sched[u] % R->depth] = s;
  set_time(R, R->start, i, s);
  set_time(R, R->end, i, e);
  if (e > S->max_e) S->max_e = e;
  S->n_sched[u]++;
  int64_t x[MAX_OPERANDS];
  operands(R, i, op, x);
  if (R->races && !accesses(S, u, i, kind, x)) return 0;
  execute(S, kind, x);
  for (int w = 0; w < nq; w++) {
    if (!(R->signal[i] >> w & 1)) continue;
    Channel *c = &S->chan[u][w];
    if (!chan_push(S, c, e, i, R->races ? S->clock[u] : NULL)) return !fault(R, F_NO_MEMORY, i, 0, 0, 0, 0, 0);
    int64_t j = c->n_sig++, k = j - R->max_tok; /* TokenLedger.signal */
    if (k >= 0 && k < c->n_con && c->con_s[k & c->con_mask] > e) return !fault(R, F_OVERFLOW, u, w, j, i, 0, 0);
  }
  return 1;
}

static int any_pending(const Sim *S) {
  for (int u = 0; u < S->nq; u++)
    if (S->pend_len[u]) return 1;
  return 0;
}

/* timing._deadlock: the first head waiting on an empty channel. */
static void deadlock(Sim *S, int64_t pc) {
  for (int u = 0; u < S->nq; u++) {
    if (!S->pend_len[u]) continue;
    int64_t i = head_of(S, u);
    for (int v = 0; v < S->nq; v++)
      if (S->R->wait[i] >> v & 1 && !S->chan[v][u].len) {
        fault(S->R, F_DEADLOCK, i, u, v, pc, 0, 0);
        return;
      }
  }
  fault(S->R, F_NO_PROGRESS, pc, 0, 0, 0, 0, 0);
}

static int schedule(Sim *S) {
  Run *R = S->R;
  const int nq = S->nq;
  const int several_ports = __builtin_popcount(R->port_units) > 1;
  int64_t pc = 0, d_prev = -1;
  int halted = 0;
  for (;;) {
    int progress = 0;
    /* 1. dispatch in program order as far as the rules allow */
    while (pc < R->n && !halted) {
      int u = R->unit[pc];
      if (u >= nq) {
        if (any_pending(S)) break;
        int64_t d = d_prev + 1;
        if (S->max_e > d) R->control_stalls[0] += S->max_e - d, d = S->max_e;
        if (R->races) { /* RaceChecker.sync */
          for (int w = 0; w < nq; w++) {
            int64_t top = 0;
            for (int v = 0; v < nq; v++) top = S->clock[v][w] > top ? S->clock[v][w] : top;
            for (int v = 0; v < nq; v++) S->clock[v][w] = top;
          }
        }
        set_time(R, R->dispatch, pc, d), set_time(R, R->start, pc, d), set_time(R, R->end, pc, d);
        d_prev = d;
        pc++;
        progress = 1;
        if (R->op[pc - 1] == K_HALT) {
          halted = 1;
          R->cycles = d + 1;
          if (R->cycles > R->limit) return fault(R, F_LIMIT_HALT, pc - 1, d, 0, 0, 0, 0);
        }
        continue;
      }
      if (S->pend_len[u] >= R->depth) break;
      int64_t d = d_prev + 1;
      int64_t k = S->n_disp[u] - R->depth;
      if (k >= 0) {
        int64_t sk = S->starts[u * R->depth + k % R->depth] + 1;
        if (sk > d) R->control_stalls[1] += sk - d, d = sk;
      }
      if (d > R->limit) return fault(R, F_LIMIT_DISPATCH, pc, d, 0, 0, 0, 0);
      set_time(R, R->dispatch, pc, d);
      S->pend[u * R->depth + (S->pend_head[u] + S->pend_len[u]) % R->depth] = pc;
      S->pend_len[u]++;
      S->n_disp[u]++;
      d_prev = d;
      pc++;
      progress = 1;
    }
    /* 2. units that do not use the DRAM port start whenever they are ready */
    for (int u = 0; u < nq; u++) {
      if (!(R->free_units >> u & 1)) continue;
      while (S->pend_len[u]) {
        if (R->beats[head_of(S, u)]) break;
        int64_t r = ready(S, u);
        if (r < 0) break;
        if (!start_instr(S, u, r)) return R->fault;
        progress = 1;
      }
    }
    /* 3. the DRAM port: the user ready first wins it */
    if (R->port_units) {
      int64_t best_r = -1;
      int best_u = -1, blocked = 0;
      for (int u = 0; u < nq; u++) {
        if (!(R->port_units >> u & 1) || !S->pend_len[u]) continue;
        if (!R->beats[head_of(S, u)]) {
          blocked = 1;
          continue;
        }
        int64_t r = ready(S, u);
        if (r < 0) blocked = 1;
        else if (best_u < 0 || r < best_r) best_r = r, best_u = u;
      }
      if (best_u >= 0) {
        /* safe when nothing else could claim the port earlier (see timing.py) */
        int unknown_future = 0;
        if (several_ports && pc < R->n && !halted)
          for (int v = 0; v < nq; v++)
            if (R->port_units >> v & 1 && v != best_u && !S->pend_len[v]) unknown_future = 1;
        int safe = !blocked && (!unknown_future || best_r < d_prev + 2);
        if (safe || !progress) {
          if (!start_instr(S, best_u, best_r > S->port_free ? best_r : S->port_free)) return R->fault;
          progress = 1;
        }
      }
    }
    if (progress) continue;
    if (halted && !any_pending(S)) break;
    if (pc >= R->n && !halted && !any_pending(S)) return fault(R, F_NEVER_HALTS, R->n - 1, 0, 0, 0, 0, 0);
    deadlock(S, pc);
    return R->fault;
  }
  for (int v = 0; v < nq; v++) /* TokenLedger.leftover */
    for (int u = 0; u < nq; u++) {
      Channel *c = &S->chan[v][u];
      if (c->n_sig - c->n_con > R->max_tok)
        return fault(R, F_OVERFLOW, v, u, c->n_con + R->max_tok, c->prod[chan_at(c, R->max_tok)], 0, 0);
    }
  R->executed = pc;
  return F_NONE;
}

/* The entry point: run the program described by R; returns R->fault (F_NONE: halted normally). */
int tinynpu_run(Run *R) {
  Sim *S = calloc(1, sizeof *S);
  if (!S) return fault(R, F_NO_MEMORY, 0, 0, 0, 0, 0, 0);
  S->R = R;
  S->nq = R->nq;
  R->fault = F_NONE;
  int64_t con_cap = 1;
  while (con_cap < (int64_t)R->max_tok + 1) con_cap *= 2;
  /* a run's packed B is at most the size of the b scratchpad (tmm_append) */
  S->aflip = malloc(R->sp_rows[R->scope_a] * R->tile);
  S->aflip_ok = calloc(R->sp_rows[R->scope_a] / R->tile, 1);
  S->bpack = malloc(R->sp_rows[R->scope_b] * R->tile);
  S->colfix = malloc(R->sp_rows[R->scope_b] * sizeof *S->colfix);
  S->pend = malloc(R->nq * R->depth * sizeof *S->pend);
  S->starts = calloc(R->nq * R->depth, sizeof *S->starts);
  int ok = S->pend && S->starts && S->aflip && S->aflip_ok && S->bpack && S->colfix;
  for (int s = 0; s < MAX_RES; s++) S->tmm.lo[s] = INT64_MAX, S->tmm.hi[s] = INT64_MIN;
  for (int v = 0; v < R->nq; v++)
    for (int u = 0; u < R->nq; u++) {
      Channel *c = &S->chan[v][u];
      c->con_s = malloc(con_cap * sizeof *c->con_s);
      c->con_mask = con_cap - 1;
      ok = ok && c->con_s;
    }
  for (int u = 0; u < R->nq; u++) S->head_ready[u] = -1;
  for (int r = 0; r < MAX_RES; r++)
    for (int u = 0; u < MAX_UNITS; u++) S->logs[r][u].prune_at = PRUNE_AT;
  int result = ok ? schedule(S) : fault(R, F_NO_MEMORY, 0, 0, 0, 0, 0, 0);
  if (ok) tmm_flush(S); /* the pending tmms, also after a fault: the state is that of every executed instruction */
  for (int v = 0; v < R->nq; v++)
    for (int u = 0; u < R->nq; u++) {
      Channel *c = &S->chan[v][u];
      free(c->e), free(c->prod), free(c->clock), free(c->con_s);
    }
  for (int r = 0; r < MAX_RES; r++)
    for (int u = 0; u < MAX_UNITS; u++) free(S->logs[r][u].a);
  free(S->pend), free(S->starts), free(S->aflip), free(S->aflip_ok), free(S->bpack), free(S->colfix), free(S);
  return result;
}
