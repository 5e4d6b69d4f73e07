; error: undefined_label.s:3:22: undefined symbol 'BIAS'
.tensor X, 0x0, int8, [16, 16], input
    load acc[1008], [BIAS], rows=1
    halt
