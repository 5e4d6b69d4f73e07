"""tinynpu.compiler"""
