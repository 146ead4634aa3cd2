/*
 * Sockets bound inside another network namespace, for the embedded DNS server:
 *   bindInNetns(pid, stream, address, port) -> fd
 * opens an IPv4 socket (TCP when `stream`, else UDP) in the network namespace of PID, binds it to
 * ADDRESS:PORT there, and returns its descriptor; Node then serves on it (dgram bind({fd}),
 * net.Server listen({fd})). A socket keeps the namespace it was created in, so the daemon's thread goes
 * back to its own namespace at once.
 *   configureInterface(pid, ifname, address, prefixLen, gateway)
 * in the network namespace of PID: brings `lo` and IFNAME up, gives IFNAME the IPv4 address with its
 * netmask, and, when GATEWAY is not empty, a default route through it (classic ioctls, sparing the
 * `nsenter ip` process on the path of a container start).
 *   createVeth(hostName, bridge, mtu, peerName, mac, pid)
 * one RTM_NEWLINK over rtnetlink: a veth pair whose host end HOSTNAME is up on BRIDGE and whose other end
 * PEERNAME (with MAC) is created inside the network namespace of PID (what `ip link add ... type veth peer
 * ... netns PID` asks, without the process).
 *   configureIPv6(pid, ifname, address, prefixLen, gateway)
 * in the network namespace of PID: the IPv6 address (no duplicate address detection) and, when GATEWAY is
 * not empty, a default IPv6 route (rtnetlink, sparing `nsenter ip -6`).
 *   directDelivery(hostName, bridge, mac)
 * frames that another container of BRIDGE sends to MAC go straight to the veth HOSTNAME, past the bridge
 * and the netfilter hooks it runs for bridged traffic (br_netfilter). HOSTNAME gets a clsact qdisc whose
 * ingress is the bridge's shared filter block (numbered by the bridge's ifindex); the block holds one u32
 * filter per container (a `mirred egress redirect` to its veth), in a hash table keyed by the MAC's last
 * byte, at a slot that is a function of the MAC's last two bytes: a MAC coming back (the same address
 * given to a new container) replaces what was there. A frame no filter takes goes through the bridge.
 *   dropDirectDelivery(bridge, mac)
 * removes MAC's filter from the bridge's block (nothing when there is none, or no block).
 * Errors are thrown with the errno name as `code`.
 */
#define _GNU_SOURCE
#include <node_api.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_link.h>
#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <linux/veth.h>
#include <net/if.h>
#include <net/route.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static napi_value fail(napi_env env, int err, const char *what, const char *arg) {
  char message[512];
  snprintf(message, sizeof message, "%s %s: %s", what, arg, strerror(err));
  const char *code = err == ENOENT ? "ENOENT" : err == EINVAL ? "EINVAL" : err == EADDRINUSE ? "EADDRINUSE" : err == EPERM ? "EPERM"
                   : err == EACCES ? "EACCES" : err == ESRCH ? "ESRCH" : err == EADDRNOTAVAIL ? "EADDRNOTAVAIL" : "EIO";
  napi_throw_error(env, code, message);
  return NULL;
}

static void leave_netns(int own);

/* An interface name argument (1 to IFNAMSIZ - 1 bytes) into buf, which holds IFNAMSIZ + 1. */
static bool ifname_arg(napi_env env, napi_value value, char *buf) {
  size_t len = 0;
  return napi_get_value_string_utf8(env, value, buf, IFNAMSIZ + 1, &len) == napi_ok && len > 0 && len < IFNAMSIZ;
}

/* A MAC address argument (aa:bb:cc:dd:ee:ff) into hw. */
static bool mac_arg(napi_env env, napi_value value, unsigned char hw[6]) {
  char text[32];
  size_t len = 0;
  unsigned int mac[6];
  if (napi_get_value_string_utf8(env, value, text, sizeof text, &len) != napi_ok ||
      sscanf(text, "%x:%x:%x:%x:%x:%x", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4], &mac[5]) != 6) return false;
  for (int i = 0; i < 6; i++) {
    if (mac[i] > 0xff) return false;
    hw[i] = (unsigned char)mac[i];
  }
  return true;
}

static napi_value BindInNetns(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  int32_t pid = 0, port = 0;
  bool stream = false;
  char address[64];
  size_t len = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 ||
      napi_get_value_int32(env, argv[0], &pid) != napi_ok || pid <= 0 ||
      napi_get_value_bool(env, argv[1], &stream) != napi_ok ||
      napi_get_value_string_utf8(env, argv[2], address, sizeof address, &len) != napi_ok || len + 1 >= sizeof address ||
      napi_get_value_int32(env, argv[3], &port) != napi_ok || port < 0 || port > 65535) {
    napi_throw_type_error(env, NULL, "bindInNetns(pid, stream, address, port) needs a pid, a boolean, an IPv4 address and a port");
    return NULL;
  }
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, address, &sin.sin_addr) != 1) {
    napi_throw_type_error(env, NULL, "bindInNetns: invalid IPv4 address");
    return NULL;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/net", pid);
  int own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0) return fail(env, errno, "open", "/proc/thread-self/ns/net");
  int target = open(path, O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    int err = errno;
    close(own);
    return fail(env, err, "open", path);
  }
  if (setns(target, CLONE_NEWNET) != 0) {
    int err = errno;
    close(own);
    close(target);
    return fail(env, err, "setns", path);
  }
  close(target);
  int err = 0;
  const char *step = "socket in";
  int sock = socket(AF_INET, (stream ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0) {
    err = errno;
  } else {
    int one = 1;
    if (stream) setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(sock, (struct sockaddr *)&sin, sizeof sin) != 0) {
      err = errno;
      step = "bind in";
      close(sock);
      sock = -1;
    }
  }
  leave_netns(own);
  if (err) return fail(env, err, step, path);
  napi_value result;
  napi_create_int32(env, sock, &result);
  return result;
}

/* Joins the namespace of pid on this thread; returns the descriptor of the thread's own namespace, or -1 (errno set). */
static int enter_netns(int32_t pid, char *path, size_t size) {
  snprintf(path, size, "/proc/%d/ns/net", pid);
  int own = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (own < 0) return -1;
  int target = open(path, O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    int err = errno;
    close(own);
    errno = err;
    return -1;
  }
  if (setns(target, CLONE_NEWNET) != 0) {
    int err = errno;
    close(own);
    close(target);
    errno = err;
    return -1;
  }
  close(target);
  return own;
}

static void leave_netns(int own) {
  if (setns(own, CLONE_NEWNET) != 0) {
    /* The thread cannot go back: nothing sane can continue on it. */
    perror("berthd: cannot return to the daemon's network namespace");
    abort();
  }
  close(own);
}

static int set_up(int sock, const char *ifname) {
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
  if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) return -1;
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  return ioctl(sock, SIOCSIFFLAGS, &ifr);
}

static void fill_in(struct sockaddr *sa, struct in_addr addr) {
  struct sockaddr_in *sin = (struct sockaddr_in *)sa;
  memset(sin, 0, sizeof *sin);
  sin->sin_family = AF_INET;
  sin->sin_addr = addr;
}

/* The arguments (pid, ifname, address, prefixLen, gateway) of configureInterface and configureIPv6. */
struct iface_args {
  int32_t pid, prefix;
  char ifname[IFNAMSIZ + 1];
  bool with_gateway;
  union {
    struct in_addr v4;
    struct in6_addr v6;
  } addr, gw;
};

/* Reads them for FAMILY (AF_INET or AF_INET6); false, with a TypeError saying `usage`, when they are not that. */
static bool iface_args(napi_env env, napi_callback_info info, int family, const char *usage, struct iface_args *a) {
  size_t argc = 5;
  napi_value argv[5];
  char address[64], gateway[64];
  size_t len = 0;
  int32_t min_prefix = family == AF_INET ? 0 : 1, max_prefix = family == AF_INET ? 32 : 128;
  memset(a, 0, sizeof *a);
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5 ||
      napi_get_value_int32(env, argv[0], &a->pid) != napi_ok || a->pid <= 0 ||
      !ifname_arg(env, argv[1], a->ifname) ||
      napi_get_value_string_utf8(env, argv[2], address, sizeof address, &len) != napi_ok || inet_pton(family, address, &a->addr) != 1 ||
      napi_get_value_int32(env, argv[3], &a->prefix) != napi_ok || a->prefix < min_prefix || a->prefix > max_prefix ||
      napi_get_value_string_utf8(env, argv[4], gateway, sizeof gateway, &len) != napi_ok || (len > 0 && inet_pton(family, gateway, &a->gw) != 1)) {
    napi_throw_type_error(env, NULL, usage);
    return false;
  }
  a->with_gateway = len > 0;
  return true;
}

static napi_value ConfigureInterface(napi_env env, napi_callback_info info) {
  struct iface_args a;
  if (!iface_args(env, info, AF_INET, "configureInterface(pid, ifname, address, prefixLen, gateway) needs a pid, an interface name, an IPv4 address, a prefix length and a gateway or ''", &a)) return NULL;
  int32_t pid = a.pid, prefix = a.prefix;
  char *ifname = a.ifname;
  struct in_addr addr = a.addr.v4, gw = a.gw.v4, mask;
  bool with_gateway = a.with_gateway;
  mask.s_addr = prefix == 0 ? 0 : htonl(0xffffffffu << (32 - prefix));
  char path[64];
  int own = enter_netns(pid, path, sizeof path);
  if (own < 0) return fail(env, errno, "enter the network namespace", path);
  int err = 0;
  const char *step = "socket in";
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) err = errno;
  else {
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    strncpy(ifr.ifr_name, ifname, IFNAMSIZ - 1);
    if (set_up(sock, "lo") != 0) { err = errno; step = "set lo up in"; }
    if (!err) {
      fill_in(&ifr.ifr_addr, addr);
      if (ioctl(sock, SIOCSIFADDR, &ifr) != 0) { err = errno; step = "set the address in"; }
    }
    if (!err) {
      fill_in(&ifr.ifr_netmask, mask);
      if (ioctl(sock, SIOCSIFNETMASK, &ifr) != 0) { err = errno; step = "set the netmask in"; }
    }
    if (!err && set_up(sock, ifname) != 0) { err = errno; step = "set the interface up in"; }
    if (!err && with_gateway) {
      struct rtentry rt;
      memset(&rt, 0, sizeof rt);
      struct in_addr any = { 0 };
      fill_in(&rt.rt_dst, any);
      fill_in(&rt.rt_genmask, any);
      fill_in(&rt.rt_gateway, gw);
      rt.rt_flags = RTF_UP | RTF_GATEWAY;
      rt.rt_dev = ifname;
      if (ioctl(sock, SIOCADDRT, &rt) != 0) { err = errno; step = "add the default route in"; }
    }
    close(sock);
  }
  leave_netns(own);
  if (err) return fail(env, err, step, path);
  return NULL;
}

struct nlreq {
  struct nlmsghdr nh;
  struct ifinfomsg ifi;
  char attrs[1024];
};

/* Starts an rtnetlink request with FLAGS (NLM_F_CREATE | NLM_F_EXCL for one that creates something) that asks for an acknowledgement. */
static void new_request(struct nlmsghdr *nh, unsigned short type, unsigned short flags, size_t payload, unsigned int seq) {
  nh->nlmsg_len = NLMSG_LENGTH(payload);
  nh->nlmsg_type = type;
  nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
  nh->nlmsg_seq = seq;
}

static struct rtattr *add_attr(struct nlmsghdr *nh, unsigned short type, const void *data, size_t len) {
  struct rtattr *rta = (struct rtattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));
  rta->rta_type = type;
  rta->rta_len = RTA_LENGTH(len);
  if (len) memcpy(RTA_DATA(rta), data, len);
  nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + RTA_ALIGN(rta->rta_len);
  return rta;
}

static void end_nest(struct nlmsghdr *nh, struct rtattr *nest) {
  nest->rta_len = (unsigned short)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len) - (char *)nest);
}

/* What failed in netlink_ask: the kernel refused the request, or the socket failed to send it or read the answer. */
enum netlink_failure { NETLINK_REFUSED, NETLINK_SEND, NETLINK_RECEIVE };

/* Sends one rtnetlink request on sock and waits for its acknowledgement; returns 0 or an errno (*failed says where). */
static int netlink_ask(int sock, struct nlmsghdr *nh, enum netlink_failure *failed) {
  struct sockaddr_nl kernel;
  memset(&kernel, 0, sizeof kernel);
  kernel.nl_family = AF_NETLINK;
  *failed = NETLINK_SEND;
  if (sendto(sock, nh, nh->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) return errno;
  *failed = NETLINK_RECEIVE;
  char answer[4096];
  for (;;) {
    ssize_t n = recv(sock, answer, sizeof answer, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    for (struct nlmsghdr *h = (struct nlmsghdr *)answer; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_type == NLMSG_ERROR && h->nlmsg_seq == nh->nlmsg_seq) {
        *failed = NETLINK_REFUSED;
        return -((struct nlmsgerr *)NLMSG_DATA(h))->error;
      }
    }
  }
}

static napi_value CreateVeth(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  char host[IFNAMSIZ + 1], bridge[IFNAMSIZ + 1], peer[IFNAMSIZ + 1];
  int32_t mtu = 0, pid = 0;
  unsigned char hw[6];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 6 ||
      !ifname_arg(env, argv[0], host) || !ifname_arg(env, argv[1], bridge) ||
      napi_get_value_int32(env, argv[2], &mtu) != napi_ok || mtu < 68 || mtu > 65535 ||
      !ifname_arg(env, argv[3], peer) || !mac_arg(env, argv[4], hw) ||
      napi_get_value_int32(env, argv[5], &pid) != napi_ok || pid <= 0) {
    napi_throw_type_error(env, NULL, "createVeth(hostName, bridge, mtu, peerName, mac, pid) needs two interface names, an MTU, a name, a MAC and a pid");
    return NULL;
  }
  unsigned int master = if_nametoindex(bridge);
  if (master == 0) return fail(env, errno, "find the bridge", bridge);
  uint32_t mtu32 = (uint32_t)mtu, pid32 = (uint32_t)pid;

  struct nlreq req;
  memset(&req, 0, sizeof req);
  new_request(&req.nh, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, sizeof(struct ifinfomsg), 1);
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_flags = IFF_UP;
  req.ifi.ifi_change = IFF_UP;
  add_attr(&req.nh, IFLA_IFNAME, host, strlen(host) + 1);
  add_attr(&req.nh, IFLA_MTU, &mtu32, sizeof mtu32);
  add_attr(&req.nh, IFLA_MASTER, &master, sizeof master);
  struct rtattr *linkinfo = add_attr(&req.nh, IFLA_LINKINFO, NULL, 0);
  add_attr(&req.nh, IFLA_INFO_KIND, "veth", 4);
  struct rtattr *data = add_attr(&req.nh, IFLA_INFO_DATA, NULL, 0);
  struct rtattr *peerinfo = add_attr(&req.nh, VETH_INFO_PEER, NULL, 0);
  /* The peer's ifinfomsg comes first inside VETH_INFO_PEER, then its attributes. */
  req.nh.nlmsg_len += sizeof(struct ifinfomsg);
  add_attr(&req.nh, IFLA_IFNAME, peer, strlen(peer) + 1);
  add_attr(&req.nh, IFLA_MTU, &mtu32, sizeof mtu32);
  add_attr(&req.nh, IFLA_ADDRESS, hw, sizeof hw);
  add_attr(&req.nh, IFLA_NET_NS_PID, &pid32, sizeof pid32);
  end_nest(&req.nh, peerinfo);
  end_nest(&req.nh, data);
  end_nest(&req.nh, linkinfo);

  int sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (sock < 0) return fail(env, errno, "open", "rtnetlink");
  enum netlink_failure failed;
  int err = netlink_ask(sock, &req.nh, &failed);
  close(sock);
  if (!err) return NULL;
  return fail(env, err, failed == NETLINK_SEND ? "send RTM_NEWLINK for" : failed == NETLINK_RECEIVE ? "read the answer for" : "create the veth pair", host);
}

struct addrreq {
  struct nlmsghdr nh;
  struct ifaddrmsg ifa;
  char attrs[256];
};

struct routereq {
  struct nlmsghdr nh;
  struct rtmsg rtm;
  char attrs[256];
};

/*
 *   configureIPv6(pid, ifname, address, prefixLen, gateway)
 * in the network namespace of PID: gives IFNAME the IPv6 address with its prefix, without duplicate address
 * detection (IFA_F_NODAD: usable at once), and, when GATEWAY is not empty, a default IPv6 route through it
 * (RTM_NEWADDR and RTM_NEWROUTE over rtnetlink, as `ip -6 addr add ... nodad` and `ip -6 route add default`).
 */
static napi_value ConfigureIPv6(napi_env env, napi_callback_info info) {
  struct iface_args a;
  if (!iface_args(env, info, AF_INET6, "configureIPv6(pid, ifname, address, prefixLen, gateway) needs a pid, an interface name, an IPv6 address, a prefix length and a gateway or ''", &a)) return NULL;
  int32_t pid = a.pid, prefix = a.prefix;
  const char *ifname = a.ifname;
  struct in6_addr addr = a.addr.v6, gw = a.gw.v6;
  bool with_gateway = a.with_gateway;
  char path[64];
  int own = enter_netns(pid, path, sizeof path);
  if (own < 0) return fail(env, errno, "enter the network namespace", path);
  int err = 0;
  enum netlink_failure failed;
  const char *step = "open rtnetlink in";
  int sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (sock < 0) err = errno;
  unsigned int index = 0;
  if (!err) {
    index = if_nametoindex(ifname);
    if (index == 0) { err = errno; step = "find the interface in"; }
  }
  if (!err) {
    struct addrreq req;
    memset(&req, 0, sizeof req);
    new_request(&req.nh, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, sizeof(struct ifaddrmsg), 1);
    req.ifa.ifa_family = AF_INET6;
    req.ifa.ifa_prefixlen = (unsigned char)prefix;
    req.ifa.ifa_flags = IFA_F_NODAD;
    req.ifa.ifa_scope = RT_SCOPE_UNIVERSE;
    req.ifa.ifa_index = index;
    add_attr(&req.nh, IFA_LOCAL, &addr, sizeof addr);
    add_attr(&req.nh, IFA_ADDRESS, &addr, sizeof addr);
    err = netlink_ask(sock, &req.nh, &failed);
    if (err) step = "add the IPv6 address in";
  }
  if (!err && with_gateway) {
    struct routereq req;
    memset(&req, 0, sizeof req);
    new_request(&req.nh, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, sizeof(struct rtmsg), 2);
    req.rtm.rtm_family = AF_INET6;
    req.rtm.rtm_dst_len = 0;
    req.rtm.rtm_table = RT_TABLE_MAIN;
    req.rtm.rtm_protocol = RTPROT_BOOT;
    req.rtm.rtm_scope = RT_SCOPE_UNIVERSE;
    req.rtm.rtm_type = RTN_UNICAST;
    add_attr(&req.nh, RTA_GATEWAY, &gw, sizeof gw);
    uint32_t oif = index;
    add_attr(&req.nh, RTA_OIF, &oif, sizeof oif);
    err = netlink_ask(sock, &req.nh, &failed);
    if (err) step = "add the default IPv6 route in";
  }
  if (sock >= 0) close(sock);
  leave_netns(own);
  if (err) return fail(env, err, step, path);
  return NULL;
}

struct tcreq {
  struct nlmsghdr nh;
  struct tcmsg tcm;
  char attrs[512];
};

/* Where the filters of direct delivery live in a bridge's block: one u32 classifier at this priority, its
 * hash table 1: (256 buckets, by the destination MAC's last byte), and the root node that hashes into it. */
#define DIRECT_PRIO 1u
#define DIRECT_TABLE 0x00100000u
#define DIRECT_ROOT_LINK 0x80000001u

/* The filter handle of MAC in table 1:, bucket MAC[5], node MAC[4] + 1 (node 0 is not a node). */
static uint32_t direct_handle(const unsigned char mac[6]) {
  return DIRECT_TABLE | ((uint32_t)mac[5] << 12) | ((uint32_t)mac[4] + 1u);
}

/* A traffic control request; the caller says on what (a device's qdisc, a block's filter). */
static void tc_request(struct tcreq *req, unsigned short type, unsigned short flags, unsigned int seq) {
  memset(req, 0, sizeof *req);
  new_request(&req->nh, type, flags, sizeof(struct tcmsg), seq);
  req->tcm.tcm_family = AF_UNSPEC;
}

/* A request on the direct delivery filter HANDLE in BLOCK. */
static void block_filter(struct tcreq *req, unsigned short type, unsigned short flags, unsigned int seq, uint32_t block, uint32_t handle) {
  tc_request(req, type, flags, seq);
  req->tcm.tcm_ifindex = (int)TCM_IFINDEX_MAGIC_BLOCK;
  req->tcm.tcm_block_index = block;
  req->tcm.tcm_handle = handle;
  req->tcm.tcm_info = TC_H_MAKE(DIRECT_PRIO << 16, htons(ETH_P_ALL));
  add_attr(&req->nh, TCA_KIND, "u32", 4);
}

/* Sends REQ and waits for its answer; an errno listed in OK (0-terminated) counts as success. */
static int tc_ask(int sock, struct tcreq *req, const int *ok) {
  enum netlink_failure failed;
  int err = netlink_ask(sock, &req->nh, &failed);
  for (; err && ok && *ok; ok++) {
    if (err == *ok && failed == NETLINK_REFUSED) return 0;
  }
  return err;
}

static napi_value DirectDelivery(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  char host[IFNAMSIZ + 1], bridge[IFNAMSIZ + 1];
  unsigned char mac[6];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 ||
      !ifname_arg(env, argv[0], host) || !ifname_arg(env, argv[1], bridge) || !mac_arg(env, argv[2], mac)) {
    napi_throw_type_error(env, NULL, "directDelivery(hostName, bridge, mac) needs two interface names and a MAC");
    return NULL;
  }
  unsigned int block = if_nametoindex(bridge);
  if (block == 0) return fail(env, errno, "find the bridge", bridge);
  unsigned int dev = if_nametoindex(host);
  if (dev == 0) return fail(env, errno, "find the interface", host);
  int sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (sock < 0) return fail(env, errno, "open", "rtnetlink");
  static const int exists[] = {EEXIST, 0};
  static const int absent[] = {ENOENT, 0};
  struct tcreq req;
  const char *step = "attach the bridge's filter block to";
  /* The veth's ingress is the bridge's block. */
  tc_request(&req, RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, 1);
  req.tcm.tcm_ifindex = (int)dev;
  req.tcm.tcm_parent = TC_H_CLSACT;
  req.tcm.tcm_handle = TC_H_MAKE(TC_H_CLSACT, 0);
  add_attr(&req.nh, TCA_KIND, "clsact", 7);
  uint32_t block32 = block;
  add_attr(&req.nh, TCA_INGRESS_BLOCK, &block32, sizeof block32);
  int err = tc_ask(sock, &req, exists);
  if (!err) {
    /* The hash table, once per block. */
    step = "add the direct delivery table for";
    block_filter(&req, RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL, 2, block, DIRECT_TABLE);
    struct rtattr *options = add_attr(&req.nh, TCA_OPTIONS, NULL, 0);
    uint32_t divisor = 256;
    add_attr(&req.nh, TCA_U32_DIVISOR, &divisor, sizeof divisor);
    end_nest(&req.nh, options);
    err = tc_ask(sock, &req, exists);
  }
  if (!err) {
    /* The root node: every frame is looked up in the bucket of its destination MAC's last byte (at -9). */
    step = "add the direct delivery lookup for";
    block_filter(&req, RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL, 3, block, DIRECT_ROOT_LINK);
    struct rtattr *options = add_attr(&req.nh, TCA_OPTIONS, NULL, 0);
    struct {
      struct tc_u32_sel sel;
      struct tc_u32_key key;
    } sel;
    memset(&sel, 0, sizeof sel);
    sel.sel.nkeys = 1;
    sel.sel.hoff = -12;
    sel.sel.hmask = htonl(0xff);
    add_attr(&req.nh, TCA_U32_SEL, &sel, sizeof sel);
    uint32_t link = DIRECT_TABLE, flags = TCA_CLS_FLAGS_SKIP_HW;
    add_attr(&req.nh, TCA_U32_LINK, &link, sizeof link);
    add_attr(&req.nh, TCA_U32_FLAGS, &flags, sizeof flags);
    end_nest(&req.nh, options);
    err = tc_ask(sock, &req, exists);
  }
  uint32_t handle = direct_handle(mac);
  if (!err) {
    /* Whatever held the slot (an earlier container with this address, or a MAC sharing its last two bytes) goes. */
    step = "replace the direct delivery filter of";
    block_filter(&req, RTM_DELTFILTER, 0, 4, block, handle);
    err = tc_ask(sock, &req, absent);
  }
  if (!err) {
    step = "add the direct delivery filter of";
    block_filter(&req, RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL, 5, block, handle);
    struct rtattr *options = add_attr(&req.nh, TCA_OPTIONS, NULL, 0);
    uint32_t bucket = handle & 0xfffff000u, flags = TCA_CLS_FLAGS_SKIP_HW;
    add_attr(&req.nh, TCA_U32_HASH, &bucket, sizeof bucket);
    /* The destination MAC: its first two bytes end the word at -16, its last four are the word at -12. */
    struct {
      struct tc_u32_sel sel;
      struct tc_u32_key keys[2];
    } sel;
    memset(&sel, 0, sizeof sel);
    sel.sel.flags = TC_U32_TERMINAL;
    sel.sel.nkeys = 2;
    sel.keys[0].mask = htonl(0xffff);
    sel.keys[0].val = htonl(((uint32_t)mac[0] << 8) | mac[1]);
    sel.keys[0].off = -16;
    sel.keys[1].mask = htonl(0xffffffffu);
    sel.keys[1].val = htonl(((uint32_t)mac[2] << 24) | ((uint32_t)mac[3] << 16) | ((uint32_t)mac[4] << 8) | mac[5]);
    sel.keys[1].off = -12;
    add_attr(&req.nh, TCA_U32_SEL, &sel, sizeof sel);
    add_attr(&req.nh, TCA_U32_FLAGS, &flags, sizeof flags);
    struct rtattr *actions = add_attr(&req.nh, TCA_U32_ACT, NULL, 0);
    struct rtattr *first = add_attr(&req.nh, 1, NULL, 0);
    add_attr(&req.nh, TCA_ACT_KIND, "mirred", 7);
    struct rtattr *act_options = add_attr(&req.nh, TCA_ACT_OPTIONS, NULL, 0);
    struct tc_mirred parms;
    memset(&parms, 0, sizeof parms);
    parms.action = TC_ACT_STOLEN;
    parms.eaction = TCA_EGRESS_REDIR;
    parms.ifindex = dev;
    add_attr(&req.nh, TCA_MIRRED_PARMS, &parms, sizeof parms);
    end_nest(&req.nh, act_options);
    end_nest(&req.nh, first);
    end_nest(&req.nh, actions);
    end_nest(&req.nh, options);
    err = tc_ask(sock, &req, NULL);
  }
  close(sock);
  if (err) return fail(env, err, step, host);
  return NULL;
}

static napi_value DropDirectDelivery(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  char bridge[IFNAMSIZ + 1];
  unsigned char mac[6];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      !ifname_arg(env, argv[0], bridge) || !mac_arg(env, argv[1], mac)) {
    napi_throw_type_error(env, NULL, "dropDirectDelivery(bridge, mac) needs an interface name and a MAC");
    return NULL;
  }
  unsigned int block = if_nametoindex(bridge);
  if (block == 0) return NULL;
  int sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (sock < 0) return fail(env, errno, "open", "rtnetlink");
  /* No filter there, or no block any more (the bridge's last veth is gone): nothing to remove. */
  static const int gone[] = {ENOENT, EINVAL, 0};
  struct tcreq req;
  block_filter(&req, RTM_DELTFILTER, 0, 1, block, direct_handle(mac));
  int err = tc_ask(sock, &req, gone);
  close(sock);
  if (err) return fail(env, err, "remove the direct delivery filter on", bridge);
  return NULL;
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "bindInNetns", NAPI_AUTO_LENGTH, BindInNetns, NULL, &fn);
  napi_set_named_property(env, exports, "bindInNetns", fn);
  napi_create_function(env, "configureInterface", NAPI_AUTO_LENGTH, ConfigureInterface, NULL, &fn);
  napi_set_named_property(env, exports, "configureInterface", fn);
  napi_create_function(env, "createVeth", NAPI_AUTO_LENGTH, CreateVeth, NULL, &fn);
  napi_set_named_property(env, exports, "createVeth", fn);
  napi_create_function(env, "configureIPv6", NAPI_AUTO_LENGTH, ConfigureIPv6, NULL, &fn);
  napi_set_named_property(env, exports, "configureIPv6", fn);
  napi_create_function(env, "directDelivery", NAPI_AUTO_LENGTH, DirectDelivery, NULL, &fn);
  napi_set_named_property(env, exports, "directDelivery", fn);
  napi_create_function(env, "dropDirectDelivery", NAPI_AUTO_LENGTH, DropDirectDelivery, NULL, &fn);
  napi_set_named_property(env, exports, "dropDirectDelivery", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
