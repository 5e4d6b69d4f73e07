; The course's seed program, lnumpy_tmm (README.md, "The programming model"), hand-written for
; M = N = K = 32 on the default config (int8 x int8 -> int32, 16x16 tiles):
;
;     for i in range(2):                       # C row tiles
;         for j in range(2):                   # C column tiles
;             accel_fill_zero(acc)                                   -> zero
;             for k in range(2):               # reduction tiles
;                 accel_dma_copy(A_reg, A[i*16:+16, k*16:+16])       -> load a
;                 accel_dma_copy(B_reg, B[j*16:+16, k*16:+16])       -> load b
;                 accel_tmm_add(acc, A_reg, B_reg)   # acc += A @ B.T -> tmm
;             accel_dma_copy(C[i*16:+16, j*16:+16], acc)             -> store
;
; One tile each of a, b and acc, exactly as in the course.  The load, tensor
; and store units run concurrently, so tokens (isa.yaml, synchronization)
; order them:
;   load a   waits tensor: the previous tmm has finished reading a and b
;            (not on the very first load: no tmm came before it);
;   load b   signals tensor: both input tiles are in;
;   tmm      waits load, signals load (a and b are free again) and, on the
;            last k, signals store (acc is final);
;   store    waits tensor, signals load: acc has been read out;
;   zero     waits store (not the first): the next C tile may clear acc.
; The very last tmm and store signal only what is still to come, so no token
; is left over at halt.  Regenerate any size with examples/seed.py.

.config default
.equ M, 32
.equ N, 32
.equ K, 32
.equ T, 16                                 ; tile edge (rows of a tile)
.equ CB, 4                                 ; bytes per C element (int32)
.tensor A, 0x0,   int8,  [M, K], input     ; A[m, k], row-major
.tensor B, 0x400, int8,  [N, K], input     ; B[n, k]: tmm computes A @ B.T
.tensor C, 0x800, int32, [M, N], output    ; C[m, n]

tile_0_0:                                   ; C[0:+16, 0:+16]
    zero  acc[0], rows=T
    load  a[0], [A + 0*T*K + 0*T], rows=T, stride=K
    load  b[0], [B + 0*T*K + 0*T], rows=T, stride=K, signal=tensor
    tmm   acc[0], a[0], b[0], wait=load, signal=load
    load  a[0], [A + 0*T*K + 1*T], rows=T, stride=K, wait=tensor
    load  b[0], [B + 0*T*K + 1*T], rows=T, stride=K, signal=tensor
    tmm   acc[0], a[0], b[0], wait=load, signal=load|store
    store [C + (0*T*N + 0*T)*CB], acc[0], rows=T, stride=N*CB, wait=tensor, signal=load

tile_0_1:                                   ; C[0:+16, 16:+16]
    zero  acc[0], rows=T, wait=store
    load  a[0], [A + 0*T*K + 0*T], rows=T, stride=K, wait=tensor
    load  b[0], [B + 1*T*K + 0*T], rows=T, stride=K, signal=tensor
    tmm   acc[0], a[0], b[0], wait=load, signal=load
    load  a[0], [A + 0*T*K + 1*T], rows=T, stride=K, wait=tensor
    load  b[0], [B + 1*T*K + 1*T], rows=T, stride=K, signal=tensor
    tmm   acc[0], a[0], b[0], wait=load, signal=load|store
    store [C + (0*T*N + 1*T)*CB], acc[0], rows=T, stride=N*CB, wait=tensor, signal=load

tile_1_0:                                   ; C[16:+16, 0:+16]
    zero  acc[0], rows=T, wait=store
    load  a[0], [A + 1*T*K + 0*T], rows=T, stride=K, wait=tensor
    load  b[0], [B + 0*T*K + 0*T], rows=T, stride=K, signal=tensor
    tmm   acc[0], a[0], b[0], wait=load, signal=load
    load  a[0], [A + 1*T*K + 1*T], rows=T, stride=K, wait=tensor
    load  b[0], [B + 0*T*K + 1*T], rows=T, stride=K, signal=tensor
    tmm   acc[0], a[0], b[0], wait=load, signal=load|store
    store [C + (1*T*N + 0*T)*CB], acc[0], rows=T, stride=N*CB, wait=tensor, signal=load

tile_1_1:                                   ; C[16:+16, 16:+16]
    zero  acc[0], rows=T, wait=store
    load  a[0], [A + 1*T*K + 0*T], rows=T, stride=K, wait=tensor
    load  b[0], [B + 1*T*K + 0*T], rows=T, stride=K, signal=tensor
    tmm   acc[0], a[0], b[0], wait=load, signal=load
    load  a[0], [A + 1*T*K + 1*T], rows=T, stride=K, wait=tensor
    load  b[0], [B + 1*T*K + 1*T], rows=T, stride=K, signal=tensor
    tmm   acc[0], a[0], b[0], wait=load, signal=store
    store [C + (1*T*N + 1*T)*CB], acc[0], rows=T, stride=N*CB, wait=tensor

    halt
