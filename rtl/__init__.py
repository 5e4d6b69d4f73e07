"""tinynpu.rtl"""
