; error: duplicate_label.s:5:1: duplicate label 'loop' (first defined at duplicate_label.s:2:1)
loop:
    sync
    halt
loop:
    halt
