#include "mpi_store.hpp"

#include <gloo/common/error.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>

namespace xmc::conformance {

namespace {

constexpr int kRequestTag = 1, kReplyTag = 2;

// A request: op (1 byte: S set, G get, W wait), key count (u32), each key as length (u32) and bytes,
// then the value (set only).
std::vector<char> pack(char op, const std::vector<std::string> &keys, const std::vector<char> &data) {
    std::vector<char> m{op};
    auto u32 = [&](uint32_t x) { m.insert(m.end(), reinterpret_cast<char *>(&x), reinterpret_cast<char *>(&x) + 4); };
    u32(uint32_t(keys.size()));
    for (const auto &k : keys) {
        u32(uint32_t(k.size()));
        m.insert(m.end(), k.begin(), k.end());
    }
    m.insert(m.end(), data.begin(), data.end());
    return m;
}

struct Request {
    int from = 0;
    char op = 0;
    std::vector<std::string> keys;
    std::vector<char> data;
};

Request unpack(int from, const std::vector<char> &m) {
    Request r;
    r.from = from;
    size_t at = 0;
    auto u32 = [&] {
        uint32_t x = 0;
        if (at + 4 > m.size()) throw std::runtime_error("mpi store: truncated request");
        std::memcpy(&x, m.data() + at, 4);
        at += 4;
        return x;
    };
    if (m.empty()) throw std::runtime_error("mpi store: empty request");
    r.op = m[at++];
    for (uint32_t n = u32(); n > 0; --n) {
        const uint32_t len = u32();
        if (at + len > m.size()) throw std::runtime_error("mpi store: truncated key");
        r.keys.emplace_back(m.data() + at, len);
        at += len;
    }
    r.data.assign(m.begin() + long(at), m.end());
    return r;
}

// Polls instead of blocking in MPI, so that an idle store costs no core (Open MPI's blocking calls
// spin) and a client can give up at its timeout.
void nap() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }

} // namespace

MpiStore::MpiStore(MPI_Comm comm) {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
        throw std::runtime_error("the MPI store needs MPI_THREAD_MULTIPLE (MPI_Init_thread)");
    MPI_Comm_dup(comm, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    if (rank_ == 0) server_ = std::thread([this] { serve(); });
}

MpiStore::~MpiStore() {
    MPI_Barrier(comm_);  // no client has a request left
    if (rank_ == 0) {
        stop_ = true;
        server_.join();
    }
    MPI_Comm_free(&comm_);
}

void MpiStore::serve() {
    std::map<std::string, std::vector<char>> kv;
    std::vector<Request> pending;  // gets and waits for keys not set yet
    auto ready = [&](const Request &r) {
        for (const auto &k : r.keys)
            if (!kv.count(k)) return false;
        return true;
    };
    auto answer = [&](const Request &r) {
        static const std::vector<char> none;
        const std::vector<char> &reply = r.op == 'G' ? kv[r.keys.at(0)] : none;
        MPI_Send(reply.data(), int(reply.size()), MPI_CHAR, r.from, kReplyTag, comm_);
    };
    while (!stop_) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, kRequestTag, comm_, &flag, &st);
        if (!flag) {
            nap();
            continue;
        }
        int count = 0;
        MPI_Get_count(&st, MPI_CHAR, &count);
        std::vector<char> msg(static_cast<size_t>(count));
        MPI_Recv(msg.data(), count, MPI_CHAR, st.MPI_SOURCE, kRequestTag, comm_, MPI_STATUS_IGNORE);
        Request r = unpack(st.MPI_SOURCE, msg);
        if (r.op == 'S') {
            kv[r.keys.at(0)] = std::move(r.data);
            answer(r);
            for (size_t i = 0; i < pending.size();)
                if (ready(pending[i])) {
                    answer(pending[i]);
                    pending.erase(pending.begin() + long(i));
                } else {
                    ++i;
                }
        } else if (ready(r)) {
            answer(r);
        } else {
            pending.push_back(std::move(r));
        }
    }
}

std::vector<char> MpiStore::request(char op, const std::vector<std::string> &keys, const std::vector<char> &data,
                                    std::chrono::milliseconds timeout) {
    const std::vector<char> msg = pack(op, keys, data);
    MPI_Send(msg.data(), int(msg.size()), MPI_CHAR, 0, kRequestTag, comm_);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(0, kReplyTag, comm_, &flag, &st);
        if (flag) {
            int count = 0;
            MPI_Get_count(&st, MPI_CHAR, &count);
            std::vector<char> reply(static_cast<size_t>(count));
            MPI_Recv(reply.data(), count, MPI_CHAR, 0, kReplyTag, comm_, MPI_STATUS_IGNORE);
            return reply;
        }
        if (std::chrono::steady_clock::now() > deadline) {
            std::string names;
            for (const auto &k : keys) names += (names.empty() ? "" : ", ") + k;
            throw gloo::IoException(std::string("[mpi store] Timed out waiting for keys: ") + names);
        }
        nap();
    }
}

void MpiStore::set(const std::string &key, const std::vector<char> &data) { request('S', {key}, data, kTimeout); }

std::vector<char> MpiStore::get(const std::string &key) { return request('G', {key}, {}, kTimeout); }

void MpiStore::wait(const std::vector<std::string> &keys) { wait(keys, kTimeout); }

void MpiStore::wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) {
    request('W', keys, {}, timeout);
}

} // namespace xmc::conformance
