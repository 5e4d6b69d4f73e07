; error: dram_beyond.s:4:16: load: DRAM bytes 0x3fffc00..0x400380f
; 16 rows with a 1 KiB stride run off the end of the 64 MiB DRAM
.equ LAST_KB, 0x4000000 - 1024
    load a[0], [LAST_KB], rows=16, stride=1024
    halt
