"""A minimal websocket client for tests (RFC 6455: handshake, unmasked server
frames; the client sends nothing after the handshake). Bounded reads."""
import base64
import os
import socket
import struct


class WebSocket:
    def __init__(self, port, path, protocols=None, timeout=5):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        proto = f"Sec-WebSocket-Protocol: {', '.join(protocols)}\r\n" if protocols else ""
        self.s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n{proto}\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            part = self.s.recv(4096)
            if not part:
                break
            head += part
        self.status_line, _, self.buf = head.partition(b"\r\n\r\n")
        self.status = int(self.status_line.split()[1]) if self.status_line else 0

    def _read(self, n):
        while len(self.buf) < n:
            part = self.s.recv(65536)
            if not part:
                raise EOFError
            self.buf += part
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def message(self):
        """The next text message as str, or None when the server closed."""
        try:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            data = self._read(n)
        except (EOFError, OSError):
            return None
        if b0 & 0x0F == 0x8:  # close
            return None
        return data.decode()

    def close(self):
        self.s.close()
