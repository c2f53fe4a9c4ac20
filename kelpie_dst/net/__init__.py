"""The simulated network (fault domain ``network.*``): see :mod:`kelpie_dst.net._network`."""

from ._network import Host as Host
from ._network import NetworkConfig as NetworkConfig
from ._network import SimNetwork as SimNetwork
from ._socket import SimSocket as SimSocket
from ._stdlib import StdlibSocket as StdlibSocket
