; error: unknown_mnemonic.s:4:5: unknown mnemonic 'tmm16'
; the course calls it tmm16; tinynpu's mnemonic is tmm
    zero acc[0], rows=16
    tmm16 acc[0], a[0], b[0]
    halt
