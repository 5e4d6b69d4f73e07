; error: out_of_range.s:3:39: store shift=40 is out of range
.equ SHIFT, 40
    store [0], acc[0], rows=16, shift=SHIFT, narrow=1
    halt
