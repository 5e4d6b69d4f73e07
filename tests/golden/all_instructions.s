; Golden file: every instruction and syntax form, each with its expected
; 128-bit encoding in a trailing `; => 0x...` comment (tests/test_asm_golden.py).
.config default
.equ TILE, 16
.equ ROWS, TILE * 2
.tensor X, 0x1000, int8, [64, 64], input
.tensor W, 0x2000, int8, [64, 64], input
.tensor BIAS, 0x3000, int32, [1, 16], input
.tensor OUT, 0x4000, int8, [64, 64], output
start:
    halt                                                                                             ; => 0x00000000000000000000000000000000
    sync                                                                                             ; => 0x00000000000000000000000000000001
    load a[0], [X], rows=16, stride=64                                                               ; => 0x00000800100000400000100000000002
    load b[16], [W + 0x10], rows=TILE, cols=8, stride=64, wait=tensor                                ; => 0x00000400100000400000201000410202
    load acc[1008], [BIAS], rows=1, signal=alu                                                       ; => 0x0000080001000000000030000fc24002
    load a[2032], [0x3fff000], rows=16, stride=0x100, wait=tensor|alu, signal=tensor                 ; => 0x000008001000010003fff0001fc02602
    zero acc[0], rows=16                                                                             ; => 0x00000000100000000000000000020003
    zero a[0], rows=ROWS, wait=tensor, signal=tensor                                                 ; => 0x00000000200000000000000000002203
    zero b[2047], rows=1                                                                             ; => 0x0000000001000000000000001ffd0003
    tmm acc[0], a[0], b[0]                                                                           ; => 0x00000000000002040810000000000005
    tmm acc[0], a[0], b[0], m=1, n=1, k=1, accumulate=1                                              ; => 0x00000000000002040810000000000005
    tmm acc[32], a[16], b[48], m=2, n=3, k=4, accumulate=0, wait=load, signal=load|alu|store         ; => 0x0000000000000010182003001002d105
    tmm acc[1008], a[2032], b[2032], m=127 / 127, wait=load|alu|store                                ; => 0x000000000000020408107f07f03f0d05
    store [OUT], acc[0], rows=16, stride=64, narrow=1, shift=7, relu=1, wait=tensor|alu, signal=load ; => 0x000f8800100000400000400000001604
    store [0x8000], acc[0], rows=16, cols=16, stride=128, wait=tensor                                ; => 0x00000800100000800000800000000204
    store [0x3fffff0], acc[1023], rows=1, cols=4, relu=1                                             ; => 0x000102000100000003fffff00ffc0004
    vadd acc[0], acc[16], rows=16, wait=tensor, signal=store                                         ; => 0x00000000100000000000001000008206
    vadd acc[0], acc[0], rows=1024                                                                   ; => 0x00000004000000000000000000000006
    vaddrow acc[0], acc[1008], rows=16, wait=load|tensor                                             ; => 0x0000000010000000000003f000000316
    vmax acc[0], 0, rows=16                                                                          ; => 0x00000000100000000000000000000026
    vmax acc[0], -0x8000_0000, rows=16                                                               ; => 0x00000000100000008000000000000026
    vmin acc[16], 127, rows=16                                                                       ; => 0x00000000100000000000007f00400036
    vmin acc[16], 0x7fff_ffff, rows=1, signal=store                                                  ; => 0x00000000010000007fffffff00408036
    vmul acc[0], -3, rows=0b1000                                                                     ; => 0x0000000008000000fffffffd00000046
    vmul acc[0], (1 << 20) + 5 % 3, rows=(ROWS - 1) // 2                                             ; => 0x000000000f0000000010000200000046
    vshr acc[0], 7, rows=16, wait=tensor, signal=store                                               ; => 0x00000000100000000000000700008256
    vshr acc[0], 31, rows=16                                                                         ; => 0x00000000100000000000001f00000056
    vrequant acc[32], acc[1000], rows=16, wait=tensor, signal=store                                  ; => 0x0000000010000000000003e800808266
    vrequant acc[0], acc[2], rows=1                                                                  ; => 0x00000000010000000000000200000066
    vrequantf acc[32], acc[1000], rows=16, wait=tensor, signal=store                                 ; => 0x0000000010000000000003e800808276
    vrequantf acc[0], acc[1], rows=1                                                                 ; => 0x00000000010000000000000100000076
next: halt                                                                                           ; => 0x00000000000000000000000000000000
