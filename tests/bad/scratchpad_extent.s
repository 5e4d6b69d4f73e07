; error: scratchpad_extent.s:5:10: zero dst: acc[960] spanning 128 rows reaches row 1087
; clearing a 128-row block that starts too late in the 1024-row accumulator
.equ BLOCK, 128
.equ BASE, 960
    zero acc[BASE], rows=BLOCK
    halt
