; error: misaligned_tile.s:3:17: tmm a: scratchpad row 24 is not aligned to a tile
    load a[24], [0], rows=16
    tmm acc[0], a[24], b[0], wait=load
    halt
